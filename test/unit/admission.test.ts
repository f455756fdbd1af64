/**
 * Per-instance admission (daemon/data-plane/admission.ts): at most N at once, a bounded queue
 * served round robin between keys and in order within a key, time-outs and cancellations.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Admission, type Waiter } from '../../daemon/data-plane/admission.js';

function waiter(key: string, log: string[], name: string): Waiter {
  return { key, grant: () => log.push(`grant ${name}`), expire: () => log.push(`expire ${name}`) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('Admission', () => {
  it('serves the queue round robin between keys, in order within a key, one slot at a time', async () => {
    const depths: number[] = [];
    const a = new Admission(1, 4, 60_000, (_i, d) => depths.push(d));
    const log: string[] = [];
    expect(a.take('gpu-1')).toBe(true);
    expect(a.take('gpu-1')).toBe(false);
    for (const [key, name] of [['A', 'a1'], ['A', 'a2'], ['A', 'a3'], ['B', 'b1']] as const) expect(a.wait('gpu-1', waiter(key, log, name))).toBe('queued');
    expect(a.wait('gpu-1', waiter('C', log, 'c1'))).toBe('full');
    expect(a.depth('gpu-1')).toBe(4);
    // Another instance has its own slots.
    expect(a.take('gpu-2')).toBe(true);
    for (let i = 0; i < 4; i++) {
      a.leave('gpu-1');
      await Promise.resolve();
    }
    expect(log).toEqual(['grant a1', 'grant b1', 'grant a2', 'grant a3']);
    expect(depths).toEqual([1, 2, 3, 4, 3, 2, 1, 0]);
    // Nobody waits: the slot is free again.
    a.leave('gpu-1');
    expect(a.take('gpu-1')).toBe(true);
  });

  it('a waiter past the time-out expires and leaves the queue; a cancelled one is never granted', async () => {
    vi.useFakeTimers();
    const a = new Admission(1, 4, 5000);
    const log: string[] = [];
    a.take('i');
    const w1 = waiter('A', log, 'w1');
    a.wait('i', w1);
    vi.advanceTimersByTime(2000);
    a.wait('i', waiter('B', log, 'w2'));
    a.wait('i', waiter('A', log, 'w3'));
    a.cancel('i', w1);
    vi.advanceTimersByTime(3000);
    expect(log).toEqual([]);
    vi.advanceTimersByTime(2000);
    expect(log).toEqual(['expire w2', 'expire w3']);
    expect(a.depth('i')).toBe(0);
    a.leave('i');
    await Promise.resolve();
    expect(log).toEqual(['expire w2', 'expire w3']);
    expect(a.take('i')).toBe(true);
  });
});
