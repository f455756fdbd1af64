/**
 * The store file read a record at a time (src/store/json-pieces.ts): the same value as JSON.parse
 * for every document, the same refusal for a broken one, and no string ever made of more than
 * one member or array element.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { parseJsonPieces } from '../../src/store/json-pieces.js';

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

  it('parses each record of a large array on its own: no string longer than one record', () => {
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
    expect(Math.max(...seen)).toBeLessThan(200);
    expect(buf.length).toBeGreaterThan(2_000_000);
  });
});
