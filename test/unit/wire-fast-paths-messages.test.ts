/**
 * The Messages relay's fast path (src/apis/messages/event-relay.ts, `known`): a content delta in
 * its usual bytes is sent as those bytes, unparsed. For any stream, cut at any places, it sends
 * what the parsed path sends, counts the same deltas and stops at the same place.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MessagesStreamRelay } from '../../src/apis/messages/event-relay.js';

/** The same relay with every event parsed: the reference the fast path must agree with. */
class ParsedOnly extends MessagesStreamRelay {
  override known(): number {
    return -1;
  }
}

const START =
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":0}}}\n\n';
const STOP =
  'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n';

function delta(kind: string, field: string, text: string, index = 0): string {
  return `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"${kind}","${field}":${JSON.stringify(text)}}}\n\n`;
}

/** The client's bytes and the relay's state, the stream fed in the given pieces. */
function run(
  relay: MessagesStreamRelay,
  pieces: Buffer[],
): { text: string; chunks: number; done: boolean; invalid: boolean } {
  let text = '';
  for (const p of pieces) text += relay.push(p);
  return { text, chunks: relay.contentChunks, done: relay.done, invalid: relay.invalid };
}

function cut(buf: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((a) => a % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(buf.subarray(prev, p));
    prev = p;
  }
  out.push(buf.subarray(prev));
  return out;
}

const frame = fc.oneof(
  fc.string({ unit: 'binary' }).map((t) => delta('text_delta', 'text', t)),
  fc.string().map((t) => delta('thinking_delta', 'thinking', t)),
  fc.string().map((t) => delta('input_json_delta', 'partial_json', t, 1)),
  // Spellings the fast path leaves to the parsed one: other key orders, CRLF, a second space.
  fc
    .string()
    .map(
      (t) =>
        `event: content_block_delta\ndata: {"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":${JSON.stringify(t)}}}\n\n`,
    ),
  fc.string().map((t) => delta('text_delta', 'text', t).replace(/\n/g, '\r\n')),
  fc.string().map((t) => delta('text_delta', 'text', t).replace('data: ', 'data:  ')),
);

describe('Messages content deltas by their bytes', () => {
  it('send what the parsed path sends, for any stream cut anywhere', () => {
    fc.assert(
      fc.property(fc.array(frame, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (frames, at) => {
        const stream = Buffer.from(START + frames.join('') + STOP, 'utf8');
        const fast = run(new MessagesStreamRelay('msg_ours'), cut(stream, at));
        const parsed = run(new ParsedOnly('msg_ours'), cut(stream, at));
        expect(fast).toEqual(parsed);
        expect(fast.done).toBe(true);
        expect(fast.text).toContain('"id":"msg_ours"');
      }),
      { numRuns: 400, seed: 41 },
    );
  });

  it('takes the usual deltas by their bytes: only the other events are parsed', () => {
    let parsedFrames = 0;
    class Counting extends MessagesStreamRelay {
      override frame(text: string): void {
        parsedFrames++;
        super.frame(text);
      }
    }
    const deltas = ['a', 'é ✓', '\n"'].map((t) => delta('text_delta', 'text', t)).join('');
    const r = run(new Counting('msg_ours'), [Buffer.from(START + deltas + STOP)]);
    expect([parsedFrames, r.chunks, r.done]).toEqual([3, 3, true]);
  });

  it('a literal that is not well-formed UTF-8 or JSON takes the parsed path', () => {
    const bad = Buffer.concat([
      Buffer.from(
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a',
      ),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}}\n\n'),
    ]);
    const broken = Buffer.from(delta('text_delta', 'text', 'x').replace('"x"', '"\\q"'));
    for (const b of [bad, broken]) {
      const stream = Buffer.concat([Buffer.from(START), b, Buffer.from(STOP)]);
      expect(run(new MessagesStreamRelay('msg_ours'), [stream])).toEqual(run(new ParsedOnly('msg_ours'), [stream]));
    }
  });

  it('a delta past the frame cap is refused as on the parsed path', () => {
    const stream = Buffer.from(START + delta('text_delta', 'text', 'y'.repeat(300)) + STOP);
    const fast = new MessagesStreamRelay('msg_ours', 256);
    const parsed = new ParsedOnly('msg_ours', 256);
    expect(run(fast, [stream])).toEqual(run(parsed, [stream]));
    expect(fast.invalidReason).toBe('frame_too_large');
  });
});
