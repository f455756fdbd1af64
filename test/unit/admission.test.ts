/**
 * Per-instance admission (daemon/data-plane/admission.ts): at most N at once, a bounded queue
 * served round robin between keys and in order within a key, its places shared fairly between
 * keys (eviction), time-outs and cancellations. The queue's timers run on an injected clock.
 */
import { describe, expect, it } from 'vitest';
import { Admission, type QueueTimers, type Waiter } from '../../daemon/data-plane/admission.js';

/** A manual clock: timers fire only when the test advances it. */
class Clock implements QueueTimers {
  now = 0;
  private next = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();

  set(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }

  clear(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  get armed(): number {
    return this.pending.size;
  }

  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const t of this.pending) if (t[1].at <= end && (due === undefined || t[1].at < due[1].at)) due = t;
      if (due === undefined) break;
      this.pending.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
    }
    this.now = end;
  }
}

function waiter(key: string, log: string[], name: string): Waiter {
  return {
    key,
    grant: () => log.push(`grant ${name}`),
    expire: () => log.push(`expire ${name}`),
    evict: () => log.push(`evict ${name}`),
  };
}

/** Lets the queued microtasks (grants) run. */
const settle = () => Promise.resolve();

/** One slot of 'i', held; a queue of `size` behind it. */
function busy(size: number, clock = new Clock(), timeoutMs = 60_000) {
  const depths: number[] = [];
  const a = new Admission(1, size, timeoutMs, (_i, d) => depths.push(d), clock);
  expect(a.take('i')).toBe(true);
  expect(a.take('i')).toBe(false);
  return { a, depths, clock };
}

describe('Admission', () => {
  it('serves the queue round robin between keys, in order within a key, one slot at a time', async () => {
    const { a, depths } = busy(4);
    const log: string[] = [];
    for (const [key, name] of [
      ['A', 'a1'],
      ['B', 'b1'],
      ['A', 'a2'],
      ['A', 'a3'],
    ] as const)
      expect(a.wait('i', waiter(key, log, name))).toBe('queued');
    expect(a.depth('i')).toBe(4);
    // Another instance has its own slots.
    expect(a.take('gpu-2')).toBe(true);
    for (let i = 0; i < 4; i++) {
      a.leave('i');
      await settle();
    }
    expect(log).toEqual(['grant a1', 'grant b1', 'grant a2', 'grant a3']);
    expect(depths).toEqual([1, 2, 3, 4, 3, 2, 1, 0]);
    // Nobody waits: the slot is free again.
    a.leave('i');
    expect(a.take('i')).toBe(true);
  });

  it('one key alone fills the queue: its next request is refused, none of its own is evicted', () => {
    const { a } = busy(4);
    const log: string[] = [];
    for (let n = 1; n <= 4; n++) expect(a.wait('i', waiter('A', log, `a${n}`))).toBe('queued');
    expect(a.wait('i', waiter('A', log, 'a5'))).toBe('full');
    expect(log).toEqual([]);
    expect(a.depth('i')).toBe(4);
  });

  it('a full queue: a key under its share takes the newest place of the key holding the most, which gets evict', async () => {
    const { a, depths } = busy(4);
    const log: string[] = [];
    for (const [key, name] of [
      ['A', 'a1'],
      ['A', 'a2'],
      ['A', 'a3'],
      ['B', 'b1'],
    ] as const)
      expect(a.wait('i', waiter(key, log, name))).toBe('queued');
    // A holds 3, over its share of 4 / 2: its own newcomer is refused.
    expect(a.wait('i', waiter('A', log, 'a4'))).toBe('full');
    // B holds 1, under its share of 2: a3, A's newest, makes room.
    expect(a.wait('i', waiter('B', log, 'b2'))).toBe('queued');
    expect(log).toEqual(['evict a3']);
    // B now holds its share (2 of 4 for 2 keys): refused, and A keeps its places.
    expect(a.wait('i', waiter('B', log, 'b3'))).toBe('full');
    // A third key: its share is 4 / 3 and it holds none; A and B hold 2 each: the newest of the two (b2) goes.
    expect(a.wait('i', waiter('C', log, 'c1'))).toBe('queued');
    expect(log).toEqual(['evict a3', 'evict b2']);
    expect(a.depth('i')).toBe(4);
    expect(depths).toEqual([1, 2, 3, 4, 3, 4, 3, 4]);
    for (let i = 0; i < 4; i++) {
      a.leave('i');
      await settle();
    }
    // Round robin in the order keys came into the queue; evicted waiters are never granted.
    expect(log.slice(2)).toEqual(['grant a1', 'grant b1', 'grant c1', 'grant a2']);
    expect(a.depth('i')).toBe(0);
  });

  it('a key whose last waiter is evicted leaves the round: the turn goes on without it', async () => {
    const { a } = busy(1);
    const log: string[] = [];
    expect(a.wait('i', waiter('A', log, 'a1'))).toBe('queued');
    expect(a.wait('i', waiter('B', log, 'b1'))).toBe('queued');
    expect(a.wait('i', waiter('A', log, 'a2'))).toBe('queued');
    expect(log).toEqual(['evict a1', 'evict b1']);
    a.leave('i');
    await settle();
    expect(log).toEqual(['evict a1', 'evict b1', 'grant a2']);
  });

  it('a queue of 0 refuses every waiter', () => {
    const { a } = busy(0);
    expect(a.wait('i', waiter('A', [], 'a1'))).toBe('full');
    expect(a.depth('i')).toBe(0);
  });

  it('a waiter past the time-out expires and leaves the queue; a cancelled or evicted one never expires nor is granted', async () => {
    const { a, clock } = busy(3, new Clock(), 5000);
    const log: string[] = [];
    const w1 = waiter('A', log, 'w1');
    a.wait('i', w1);
    clock.advance(2000);
    a.wait('i', waiter('B', log, 'w2'));
    a.wait('i', waiter('A', log, 'w3'));
    a.cancel('i', w1);
    // w1 gone: A holds 1 (w3), B 1 (w2); C's share is 3 / 3 and the queue has room anyway.
    a.wait('i', waiter('C', log, 'w4'));
    clock.advance(1000);
    // Full now; D, under its share, evicts the newest of those holding most: w4.
    a.wait('i', waiter('D', log, 'w5'));
    expect(log).toEqual(['evict w4']);
    // w2 and w3 came at 2000: they expire at 7000, not before; w5, at 3000, expires at 8000.
    clock.advance(3999);
    expect(log).toEqual(['evict w4']);
    clock.advance(1);
    expect(log).toEqual(['evict w4', 'expire w2', 'expire w3']);
    expect(a.depth('i')).toBe(1);
    clock.advance(1000);
    expect(log).toEqual(['evict w4', 'expire w2', 'expire w3', 'expire w5']);
    expect(a.depth('i')).toBe(0);
    // Every timer was fired or cleared: nothing is left to fire later.
    expect(clock.armed).toBe(0);
    a.leave('i');
    await settle();
    expect(log).toHaveLength(4);
    expect(a.take('i')).toBe(true);
  });

  it('a waiter granted its turn has its timer cleared', async () => {
    const { a, clock } = busy(2, new Clock(), 1000);
    const log: string[] = [];
    a.wait('i', waiter('A', log, 'a1'));
    a.leave('i');
    await settle();
    expect(clock.armed).toBe(0);
    clock.advance(5000);
    expect(log).toEqual(['grant a1']);
  });
});
