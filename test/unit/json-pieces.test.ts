/**
 * The store file read a piece at a time (src/store/json-pieces.ts): the same value as JSON.parse
 * for every document, the same refusal for a broken one, and no string ever made of much more
 * than a piece (PIECE_BYTES of array elements, or one member).
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { PIECE_BYTES, parseJsonPieces } from '../../src/store/json-pieces.js';

describe('parseJsonPieces', () => {
  it('gives what JSON.parse gives, for any document, however it is spaced', () => {
    fc.assert(
      fc.property(fc.json(), fc.constantFrom(undefined, 1, '\t'), (text, space) => {
        const doc = JSON.stringify(JSON.parse(text), null, space);
        expect(parseJsonPieces(Buffer.from(doc))).toEqual(JSON.parse(doc));
      }),
      { numRuns: 500, seed: 46 },
    );
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.array(fc.jsonValue(), { maxLength: 5 })), (obj) => {
        const doc = JSON.stringify(obj, null, 1);
        expect(parseJsonPieces(Buffer.from(doc))).toEqual(JSON.parse(doc));
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  it('keeps escaped quotes, backslashes and multi-byte text inside strings', () => {
    const doc = '{"a\\"]":["x\\\\","\\"}{[", "héllo ✓ 🚀"],"b":{"c":"\\\\\\""}, "n": -1.5e3, "t": true}';
    expect(parseJsonPieces(Buffer.from(doc))).toEqual(JSON.parse(doc));
  });

  it('keeps a "__proto__" member as a member, as JSON.parse does', () => {
    const out = parseJsonPieces(Buffer.from('{"__proto__":{"polluted":1},"keys":[]}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__', 'keys']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it.each(['{"a":[1,2', '{"a":1,}', '{"a" 1}', '{"a":[1 2]}', '{"a":1} x', '{"a":"x}', '{"a":[1,]}', ''])(
    'refuses %j with a SyntaxError',
    (doc) => {
      expect(() => parseJsonPieces(Buffer.from(doc))).toThrow(SyntaxError);
    },
  );

  it('refuses an array ending in a comma where a piece is cut, or broken within a later piece', () => {
    const big = JSON.stringify('x'.repeat(PIECE_BYTES));
    for (const doc of [`{"a":[${big},]}`, `{"a":[${big}, ]}`, `{"a":[${big},1 2]}`, `{"a":[${big},{]}`])
      expect(() => parseJsonPieces(Buffer.from(doc))).toThrow(SyntaxError);
    expect(parseJsonPieces(Buffer.from(`{"a":[${big},1,[2]]}`))).toEqual({ a: [JSON.parse(big), 1, [2]] });
  });

  it('parses a large array in pieces: no string longer than a piece and one record', () => {
    const records = Array.from({ length: 20_000 }, (_, i) => ({ id: `k${i}`, name: `key ${i}`, hash: 'x'.repeat(64) }));
    const buf = Buffer.from(JSON.stringify({ version: 3, keys: records, instances: [] }, null, 1));
    const seen: number[] = [];
    const parse = vi.spyOn(JSON, 'parse');
    try {
      expect(parseJsonPieces(buf)).toEqual({ version: 3, keys: records, instances: [] });
      for (const call of parse.mock.calls) seen.push(String(call[0]).length);
    } finally {
      parse.mockRestore();
    }
    expect(Math.max(...seen)).toBeLessThan(PIECE_BYTES + 200);
    // The keys' array, cut in pieces: more than one, each past PIECE_BYTES but the last.
    expect(seen.filter((n) => n >= PIECE_BYTES).length).toBe(Math.floor(buf.length / PIECE_BYTES));
    expect(buf.length).toBeGreaterThan(2_000_000);
  });
});
