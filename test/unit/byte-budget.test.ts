import { describe, expect, it } from 'vitest';
import { ByteBudget } from '../../src/services/byte-budget.js';

describe('ByteBudget', () => {
  it("refuses past a key's share first, then its instance's, then the daemon's, and holds nothing it refused", () => {
    const b = new ByteBudget(100, 60, 80);
    expect(b.take('a', 'i', 60)).toBeNull();
    expect(b.take('a', 'i', 1)).toBe('key');
    // Another key of the same instance: the instance's share.
    expect(b.take('b', 'i', 21)).toBe('instance');
    expect(b.take('b', 'i', 20)).toBeNull();
    expect(b.take('c', 'j', 21)).toBe('daemon');
    expect(b.take('c', 'j', 20)).toBeNull();
    // Every bound passed: the key's is named (a key over its share is told to slow down).
    expect(b.take('a', 'i', 50)).toBe('key');
    expect([b.held, b.heldBy('a'), b.heldBy('b'), b.heldFor('i'), b.heldFor('j')]).toEqual([100, 60, 20, 80, 20]);
  });

  it('says what it would refuse without holding anything', () => {
    const b = new ByteBudget(100, 60, 80);
    expect([b.wouldRefuse('a', 'i', 61), b.wouldRefuse('a', 'i', 60), b.held]).toEqual(['key', null, 0]);
    b.take('a', 'i', 50);
    expect([b.wouldRefuse('b', 'i', 31), b.wouldRefuse('c', 'j', 51), b.wouldRefuse('c', 'j', 50)]).toEqual([
      'instance',
      'daemon',
      null,
    ]);
    expect(b.held).toBe(50);
  });

  it('gives back what was held, and a key or an instance holding nothing is forgotten', () => {
    const b = new ByteBudget(100, 60);
    b.take('a', 'i', 30);
    b.take('a', 'i', 20);
    b.give('a', 'i', 30);
    expect([b.held, b.heldBy('a'), b.heldFor('i')]).toEqual([20, 20, 20]);
    b.give('a', 'i', 20);
    expect([b.held, b.heldBy('a'), b.heldFor('i')]).toEqual([0, 0, 0]);
    expect(b.take('a', 'i', 60)).toBeNull();
    // Empty bodies cost nothing either way.
    expect([b.take('c', 'i', 0), b.give('c', 'i', 0), b.heldBy('c')]).toEqual([null, undefined, 0]);
  });
});
