import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../src/services/byte-budget.js';

describe('ByteBudget', () => {
  it("refuses past a key's share first, then past the daemon's, and holds nothing it refused", () => {
    const b = new ByteBudget(100, 60);
    expect(b.take('a', 60)).toBeNull();
    expect(b.take('a', 1)).toBe('key');
    expect(b.take('b', 41)).toBe('daemon');
    expect(b.take('b', 40)).toBeNull();
    // Both bounds passed: the key's is named (a key over its share is told to slow down).
    expect(b.take('a', 50)).toBe('key');
    expect([b.held, b.heldBy('a'), b.heldBy('b')]).toEqual([100, 60, 40]);
  });

  it('gives back what was held, and a key holding nothing is forgotten', () => {
    const b = new ByteBudget(100, 60);
    b.take('a', 30);
    b.take('a', 20);
    b.give('a', 30);
    expect([b.held, b.heldBy('a')]).toEqual([20, 20]);
    b.give('a', 20);
    expect([b.held, b.heldBy('a')]).toEqual([0, 0]);
    expect(b.take('a', 60)).toBeNull();
    // Empty bodies cost nothing either way.
    expect([b.take('c', 0), b.give('c', 0), b.heldBy('c')]).toEqual([null, undefined, 0]);
  });
});
