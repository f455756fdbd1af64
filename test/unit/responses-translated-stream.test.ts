import { describe, expect, it } from 'vitest';
import { OutputBatch } from '../../src/wire/output-batch.js';
import type { IdKind, ResponseContext } from '../../src/apis/responses/object.js';
import { ResponsesStreamTranslator } from '../../src/apis/responses/stream.js';
import { TranslatedResponsesStream } from '../../src/apis/responses/translated-stream.js';

/**
 * A chat stream read by TranslatedResponsesStream, however it is cut into reads, gives the
 * events the ResponsesStreamTranslator makes of its chunks; a hostile stream (an error chunk,
 * data that is not JSON, a frame or an answer past its bound) ends with the right stop, and
 * every error event takes the next sequence number.
 */

function ctx(): ResponseContext {
  let n = 0;
  return {
    responseId: 'resp_test',
    model: 'm',
    echo: {
      instructions: null,
      tools: [],
      toolChoice: 'auto',
      parallelToolCalls: true,
      text: { format: { type: 'text' } },
      temperature: 1,
      topP: 1,
      maxOutputTokens: null,
      reasoning: null,
      metadata: {},
      truncation: 'disabled',
    },
    createdAt: 1,
    clock: { now: () => 2000 },
    ids: (kind: IdKind) => `${kind}_${++n}`,
  };
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null): Record<string, unknown> => ({
  id: 'c',
  object: 'chat.completion.chunk',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const CHUNKS = [
  chunk({ role: 'assistant', reasoning: 'hm ' }),
  chunk({ content: 'Grüße ' }),
  chunk({ content: '🌧' }),
  chunk({ tool_calls: [{ index: 0, id: 'call_1', function: { name: 'f', arguments: '{"a"' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }),
  chunk({}, 'tool_calls'),
  { id: 'c', choices: [], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } },
];
const STREAM = Buffer.from(`${CHUNKS.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`);

function read(s: TranslatedResponsesStream, pieces: Buffer[]): string {
  const out = new OutputBatch();
  for (const p of pieces) s.pushInto(p, out);
  return out.length === 0 ? '' : out.take().toString('utf8');
}

describe('TranslatedResponsesStream', () => {
  it('gives the translator’s events, however the stream is cut, and counts the chat usage', () => {
    const t = new ResponsesStreamTranslator(ctx());
    let expected = '';
    for (const c of CHUNKS) expected += t.push(c);
    expected += t.end();
    for (const size of [1, 2, 3, 7, 64, STREAM.length]) {
      const pieces: Buffer[] = [];
      for (let i = 0; i < STREAM.length; i += size) pieces.push(STREAM.subarray(i, i + size));
      const s = new TranslatedResponsesStream(ctx(), 1024, 1024);
      expect(read(s, pieces)).toBe(expected);
      expect(s.done).toBe(true);
      expect(s.counts()).toEqual({ prompt: 5, completion: 7, reasoning: 0 });
      expect(s.contentChunks).toBe(5);
    }
    expect(expected).not.toContain('[DONE]');
    expect(expected.split('\n\n').at(-2)).toMatch(/^event: response\.completed\ndata: /);
  });

  it('an error chunk ends it with one error event at the next sequence number', () => {
    const s = new TranslatedResponsesStream(ctx(), 1024, 1024);
    const text = read(s, [
      Buffer.from(`data: ${JSON.stringify(chunk({ content: 'a' }))}\n\ndata: {"error":{"message":"boom"}}\n\n`),
    ]);
    const frames = text.split('\n\n').filter((f) => f !== '');
    expect(frames.at(-1)).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'upstream_error',
        message: 'The model server ended the stream with an error.',
        param: null,
        sequence_number: frames.length - 1,
      })}`,
    );
    expect(s.sawError).toBe(true);
    expect(s.stopped).toBe(true);
  });

  it('data that is not JSON, or a frame past its bound, stops it for the relay to answer', () => {
    const bad = new TranslatedResponsesStream(ctx(), 1024, 1024);
    expect(read(bad, [Buffer.from('data: {"a":\n\n')])).toBe('');
    expect({ invalid: bad.invalid, reason: bad.invalidReason }).toEqual({ invalid: true, reason: 'not_json' });
    const big = new TranslatedResponsesStream(ctx(), 64, 1024);
    expect(read(big, [Buffer.from(`data: "${'x'.repeat(100)}`)])).toBe('');
    expect({ invalid: big.invalid, reason: big.invalidReason }).toEqual({ invalid: true, reason: 'frame_too_large' });
    expect(big.closingError({ wireCode: 'upstream_error', message: 'm' } as never)).toBe(
      `event: error\ndata: {"type":"error","code":"upstream_error","message":"m","param":null,"sequence_number":0}\n\n`,
    );
  });

  it('text past maxTextBytes: the chunk’s events, then one error event', () => {
    const s = new TranslatedResponsesStream(ctx(), 1024, 10);
    const text = read(s, [
      Buffer.from(
        `data: ${JSON.stringify(chunk({ content: '123456' }))}\n\ndata: ${JSON.stringify(chunk({ content: '7890ab' }))}\n\n`,
      ),
    ]);
    const frames = text.split('\n\n').filter((f) => f !== '');
    expect(frames.filter((f) => f.startsWith('event: response.output_text.delta'))).toHaveLength(2);
    expect(frames.at(-1)).toContain(
      `"message":"The model server's answer is larger than 10 bytes; the stream was ended."`,
    );
    expect(frames.at(-1)).toContain(`"sequence_number":${frames.length - 1}}`);
    expect(s.sawError).toBe(true);
  });
});
