/**
 * sortInPieces: the order Array.prototype.sort gives (stable: ties keep their order), made with
 * turns of the event loop between pieces of comparisons.
 */
import { describe, expect, it } from 'vitest';
import { sortInPieces } from '../../daemon/management/sort-in-pieces.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

describe('sortInPieces', () => {
  it('sorts as Array.prototype.sort does, ties in their order, for lists of every shape', async () => {
    // Numbers from a fixed sequence, many equal: the index tells ties apart.
    let seed = 7;
    const draw = (): number => (seed = (seed * 48271) % 2147483647) % 97;
    for (const n of [0, 1, 2, 3, 17, 1000, 5003]) {
      const items = Array.from({ length: n }, (_, i) => ({ v: draw(), i }));
      const byV = (a: { v: number }, b: { v: number }): number => a.v - b.v;
      expect(await sortInPieces(items, byV)).toEqual([...items].sort(byV));
      const sorted = [...items].sort(byV);
      expect(await sortInPieces(sorted, byV)).toEqual(sorted);
      expect(await sortInPieces([...sorted].reverse(), byV)).toEqual([...sorted].reverse().sort(byV));
    }
  });

  it('waits turns of the event loop between its pieces', async () => {
    const items = Array.from({ length: 20_000 }, (_, i) => (i * 7919) % 20_000);
    const ticks = turnsDuring();
    const sorted = await sortInPieces(items, (a, b) => a - b);
    const turns = ticks.stop();
    expect(sorted).toEqual(Array.from({ length: 20_000 }, (_, i) => i));
    // About 20,000 × 14 comparisons, 2,000 a turn.
    expect(turns).toBeGreaterThanOrEqual(100);
  });
});
