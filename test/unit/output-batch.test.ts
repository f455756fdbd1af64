import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OutputBatch } from '../../src/wire/output-batch.js';

describe('OutputBatch reused from one write to the next (it keeps its arrays, not their contents)', () => {
  it('each take gives exactly the pieces added since the last one, in order', () => {
    const bytes = fc.uint8Array({ maxLength: 80 }).map((a) => Buffer.from(a));
    const piece = fc.record({ prefix: fc.option(bytes, { nil: null }), source: bytes, a: fc.nat(), b: fc.nat() });
    fc.assert(
      fc.property(fc.array(fc.array(piece, { maxLength: 7 }), { minLength: 1, maxLength: 6 }), (writes) => {
        const out = new OutputBatch();
        for (const pieces of writes) {
          const expected: Buffer[] = [];
          for (const { prefix, source, a, b } of pieces) {
            const [s, e] = [a % (source.length + 1), b % (source.length + 1)].sort((x, y) => x - y) as [number, number];
            out.add(prefix, source, s, e);
            if (prefix !== null) expected.push(prefix);
            expected.push(source.subarray(s, e));
          }
          expect(out.length).toBe(Buffer.concat(expected).length);
          expect(out.take().equals(Buffer.concat(expected))).toBe(true);
          expect(out.length).toBe(0);
        }
      }),
      { numRuns: 500 },
    );
  });
});
