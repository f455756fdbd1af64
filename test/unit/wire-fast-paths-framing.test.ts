/**
 * SseRelay's fast paths give exactly what its slow paths give: framing in one pass over newlines,
 * frames forwarded as bytes (the template path), bytes that are not UTF-8, frames near the cap,
 * comments and fields; checked on generated input split at every boundary.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parses, rawContent } from '../helpers/raw-json-content.js';

describe('SseRelay framing (one pass over newlines)', () => {
  const frames = (eol: string): string =>
    [
      `data: {"id":"a","choices":[{"index":0,"delta":{"content":"h\u00e9llo"}}]}${eol}${eol}`,
      `: keep-alive comment${eol}${eol}`,
      `data: {"id":"a","choices":[{"index":0,"delta":{"content":"w\\nrld 😀"}}]}${eol}${eol}`,
      `data: {"id":"a","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}${eol}${eol}`,
      `data: [DONE]${eol}${eol}`,
    ].join('');

  it('gives the same output however the bytes are split, LF or CRLF', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    for (const eol of ['\n', '\r\n']) {
      const bytes = Buffer.from(frames(eol));
      const whole = new SseRelay('chatcmpl-x', true);
      const expected = whole.push(bytes);
      expect(whole.done).toBe(true);
      expect(expected.match(/^data: /gm)).toHaveLength(4);
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 20 }), (cuts) => {
          const relay = new SseRelay('chatcmpl-x', true);
          let out = '';
          let from = 0;
          for (const at of [...cuts].sort((x, y) => x - y)) {
            out += relay.push(bytes.subarray(from, at));
            from = at;
          }
          out += relay.push(bytes.subarray(from));
          expect(out).toBe(expected);
          expect(relay.done).toBe(true);
          expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2 });
        }),
        { numRuns: 300 },
      );
    }
  });
});

describe('SseRelay template path (frames forwarded as bytes)', () => {
  const head = (role: boolean): string =>
    `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{${role ? '"role":"assistant",' : ''}"content":`;
  const tail = '},"finish_reason":null}]}\n\n';

  it('forwards exactly what the string path would, stops at the first invalid frame, however split', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const frame = fc.tuple(fc.boolean(), rawContent).map(([role, c]) => ({
      text: `${head(role)}"${c}"${tail}`,
      data: `${head(role).slice(6)}"${c}"${tail.slice(0, -2)}`,
    }));
    fc.assert(
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 10 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (frames, cutSeeds) => {
          // The model: each frame checked with JSON.parse, its id replaced, until the first invalid one.
          let expected = '';
          let valid = 0;
          let invalid = false;
          for (const f of frames) {
            if (!parses(f.data)) {
              invalid = true;
              break;
            }
            valid++;
            expected += `data: ${f.data.replace('"id":"chatcmpl-up"', '"id":"chatcmpl-x"')}\n\n`;
          }
          const bytes = Buffer.from(frames.map((f) => f.text).join(''));
          const cuts = [...new Set(cutSeeds.map((n) => 1 + (n % Math.max(1, bytes.length - 1))))].sort((x, y) => x - y);
          const relay = new SseRelay('chatcmpl-x', false);
          let out = '';
          let from = 0;
          for (const at of [...cuts, bytes.length]) {
            if (relay.invalid) break;
            out += relay.push(bytes.subarray(from, at));
            from = at;
          }
          expect(out).toBe(expected);
          expect(relay.invalid).toBe(invalid);
          expect(relay.contentChunks).toBe(valid);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('SseRelay template path: bytes that are not UTF-8', () => {
  it('sends the bytes the string path would (repaired), never the raw invalid ones', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { OutputBatch } = await import('../../src/wire/output-batch.js');
    const head =
      'data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":';
    const tail = '},"finish_reason":null}]}\n\n';
    // Content bytes: ASCII letters, valid sequences, and the classic invalid ones (lone
    // continuation, truncated, overlong, surrogate, above U+10FFFF).
    const piece = fc.constantFrom(
      [0x61],
      [0xc3, 0xa9],
      [0xe2, 0x82, 0xac],
      [0xf0, 0x9f, 0x98, 0x80],
      [0x80],
      [0xc3],
      [0xe2, 0x82],
      [0xc0, 0xaf],
      [0xe0, 0x80, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xff],
    );
    const content = fc.array(piece, { maxLength: 6 }).map((ps) => Buffer.from(ps.flat()));
    fc.assert(
      fc.property(fc.array(content, { minLength: 1, maxLength: 6 }), (contents) => {
        const frames = contents.map((c) => Buffer.concat([Buffer.from(`${head}"`), c, Buffer.from(`"${tail}`)]));
        // The model: each frame decoded (repairing bad bytes), id replaced, encoded again.
        const expected = Buffer.from(
          frames.map((f) => f.toString('utf8').replace('"id":"chatcmpl-up"', '"id":"chatcmpl-x"')).join(''),
        );
        const relay = new SseRelay('chatcmpl-x', false);
        const out = new OutputBatch();
        for (const f of frames) relay.pushInto(f, out);
        expect(out.take().equals(expected)).toBe(true);
        expect(relay.contentChunks).toBe(frames.length);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('SseRelay: frames near the cap, CRLF frames, comments and fields, however split', () => {
  const CAP = 256;
  type Frame = { bytes: string; out: string; stops: 'done' | null };
  const eolOf = fc.constantFrom('\n', '\r\n');
  const event = (content: string): string =>
    `{"id":"up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${content}"}}]}`;
  const ours = (content: string): string => `data: ${event(content).replace('"id":"up"', '"id":"chatcmpl-x"')}\n\n`;
  // Content lengths around the cap: the event's other bytes are about 100.
  const content = fc.nat({ max: 200 }).map((n) => 'abcdefghij'.repeat(21).slice(0, n));
  const frame: fc.Arbitrary<Frame> = fc.oneof(
    fc.tuple(content, eolOf).map(([c, eol]) => ({ bytes: `data: ${event(c)}${eol}${eol}`, out: ours(c), stops: null })),
    fc.tuple(content, eolOf).map(([c, eol]) => ({
      bytes: `id: 7${eol}event: message${eol}data: ${event(c)}${eol}${eol}`,
      out: ours(c),
      stops: null,
    })),
    fc.tuple(content, eolOf).map(([c, eol]) => ({
      bytes: `: tick${eol}data: ${event(c)}${eol}retry: 5${eol}${eol}`,
      out: ours(c),
      stops: null,
    })),
    fc
      .tuple(fc.constantFrom(': keep-alive', 'retry: 3000', 'id: 9', ':'), eolOf)
      .map(([f, eol]) => ({ bytes: `${f}${eol}${eol}`, out: '', stops: null })),
    eolOf.map((eol) => ({ bytes: `data: [DONE]${eol}${eol}`, out: 'data: [DONE]\n\n', stops: 'done' as const })),
  );

  /** The model: frames in order; one over the cap (its blank line counted) stops the relay, forwarding nothing of it. */
  function model(frames: Frame[]): { out: string; reason: string | null; done: boolean } {
    let out = '';
    for (const f of frames) {
      if (Buffer.byteLength(f.bytes) > CAP) return { out, reason: 'frame_too_large', done: false };
      out += f.out;
      if (f.stops === 'done') return { out, reason: null, done: true };
    }
    return { out, reason: null, done: false };
  }

  it('gives what the frames say, refuses the first over the cap, and never holds the cap', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { OutputBatch } = await import('../../src/wire/output-batch.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const shapes = new EventLayouts();
    fc.assert(
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 10 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (frames, cutSeeds) => {
          const expected = model(frames);
          const bytes = Buffer.from(frames.map((f) => f.bytes).join(''));
          const cuts = [...new Set(cutSeeds.map((c) => 1 + (c % Math.max(1, bytes.length - 1))))].sort((x, y) => x - y);
          // Layouts learned by earlier runs are shared, as between the streams of one server.
          const relay = new SseRelay('chatcmpl-x', false, shapes, CAP);
          const out = new OutputBatch();
          let from = 0;
          for (const at of [...cuts, bytes.length]) {
            relay.pushInto(bytes.subarray(from, at), out);
            from = at;
            expect(relay.pendingBytes).toBeLessThan(CAP);
          }
          expect(out.take().toString()).toBe(expected.out);
          expect({ reason: relay.invalidReason, done: relay.done }).toEqual({
            reason: expected.reason,
            done: expected.done,
          });
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('accepts a frame of exactly the cap and refuses one byte more, cut anywhere', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    for (const eol of ['\n', '\r\n']) {
      const overhead = Buffer.byteLength(`data: ${event('')}${eol}${eol}`);
      for (const extra of [0, 1]) {
        const bytes = Buffer.from(`data: ${event('x'.repeat(CAP - overhead + extra))}${eol}${eol}`);
        for (let cut = 0; cut <= bytes.length; cut++) {
          for (const second of [cut, Math.min(bytes.length, cut + 1), Math.min(bytes.length, cut + 3)]) {
            const relay = new SseRelay('chatcmpl-x', false, undefined, CAP);
            const out =
              relay.push(bytes.subarray(0, cut)) +
              relay.push(bytes.subarray(cut, second)) +
              relay.push(bytes.subarray(second));
            expect({ eol, extra, cut, second, refused: relay.invalidReason }).toEqual({
              eol,
              extra,
              cut,
              second,
              refused: extra === 0 ? null : 'frame_too_large',
            });
            expect(out).toBe(extra === 0 ? ours('x'.repeat(CAP - overhead)) : '');
          }
        }
      }
    }
  });
});
