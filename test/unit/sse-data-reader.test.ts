import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { type SseData, SseDataReader } from '../../src/wire/sse-data-reader.js';

function readAll(reader: SseDataReader, pieces: Buffer[]): SseData[] {
  return pieces.flatMap((p) => reader.push(p));
}

function cut(bytes: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((a) => a % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  out.push(bytes.subarray(from));
  return out;
}

const refused = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    if (err instanceof ObProxyError) return `${err.code}: ${err.message}`;
    throw err;
  }
  throw new Error('accepted');
};

describe('SSE data reader', () => {
  it("reads a chat stream's chunks and its [DONE], skipping event, id and comment lines", () => {
    const stream = Buffer.from(
      ': keep-alive\n\n' +
        'data: {"choices":[{"delta":{"content":"Grüß 👋"}}]}\n\n' +
        'event: message\r\nid: 7\r\ndata: {"a":1}\r\n\r\n' +
        'data:{"b":2}\n\n' +
        'data: [1,\ndata: 2]\n\n' +
        'data: [DONE]\n\n',
    );
    expect(new SseDataReader().push(stream)).toEqual([
      { done: false, value: { choices: [{ delta: { content: 'Grüß 👋' } }] } },
      { done: false, value: { a: 1 } },
      { done: false, value: { b: 2 } },
      { done: false, value: [1, 2] },
      { done: true },
    ]);
  });

  it('any cut of the bytes into reads gives the same values', () => {
    const frames = fc.array(
      fc.oneof(
        fc.json({ maxDepth: 2 }).map((j) => ({ text: `data: ${j}\n\n`, value: JSON.parse(j) as unknown })),
        fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => {
          const j = JSON.stringify({ choices: [{ delta: { content: s } }] });
          return { text: `data: ${j}\r\n\r\n`, value: JSON.parse(j) as unknown };
        }),
      ),
      { maxLength: 8 },
    );
    fc.assert(
      fc.property(frames, fc.array(fc.nat(2000), { maxLength: 20 }), (fs, at) => {
        const bytes = Buffer.from(fs.map((f) => f.text).join('') + 'data: [DONE]\n\n');
        const reader = new SseDataReader();
        expect(readAll(reader, cut(bytes, at))).toEqual([
          ...fs.map((f) => ({ done: false, value: f.value })),
          { done: true },
        ]);
        expect(reader.pending).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('holds an unfinished frame, and refuses one past its bound, finished or not', () => {
    const reader = new SseDataReader(64);
    expect(reader.push(Buffer.from('data: {"a":'))).toEqual([]);
    expect(reader.pending).toBe(11);
    expect(reader.push(Buffer.from('1}\n'))).toEqual([]);
    expect(reader.push(Buffer.from('\n'))).toEqual([{ done: false, value: { a: 1 } }]);
    expect(reader.pending).toBe(0);

    const big = `data: "${'x'.repeat(80)}"\n\n`;
    expect(refused(() => new SseDataReader(64).push(Buffer.from(big)))).toBe(
      'upstream_error: The model server sent a stream event of more than 64 bytes.',
    );
    const dribbled = new SseDataReader(64);
    expect(
      refused(() => {
        for (const b of Buffer.from(big)) dribbled.push(Buffer.from([b]));
      }),
    ).toBe('upstream_error: The model server sent a stream event of more than 64 bytes.');
    expect(dribbled.pending).toBeLessThanOrEqual(65);
  });

  it('refuses data that is not JSON', () => {
    expect(refused(() => new SseDataReader().push(Buffer.from('data: {"a":\n\n')))).toBe(
      'upstream_error: The model server sent a stream event that is not JSON.',
    );
  });
});
