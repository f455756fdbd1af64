import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type DeadlineNode, Deadlines } from '../../daemon/data-plane/deadlines.js';

class Req implements DeadlineNode {
  dueAt = 0;
  prevDue: DeadlineNode | null = null;
  nextDue: DeadlineNode | null = null;
  passedAt: number | null = null;
  constructor(readonly name: string) {}
  deadlinePassed(): void {
    this.passedAt = performance.now();
  }
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Deadlines', () => {
  it('calls each request once, at most one period after its deadline, and never one that left', () => {
    const d = new Deadlines(250);
    const t0 = performance.now();
    const a = new Req('a');
    const b = new Req('b');
    const c = new Req('c');
    d.add(a, 1_000);
    vi.advanceTimersByTime(100);
    d.add(b, 1_000);
    d.add(c, 1_000);
    d.remove(b);
    expect(d.size).toBe(2);
    // A node that left has no links: a dead one kept by the old generation keeps no live one alive.
    expect([b.prevDue, b.nextDue]).toEqual([null, null]);
    vi.advanceTimersByTime(899);
    expect([a.passedAt, c.passedAt]).toEqual([null, null]);
    vi.advanceTimersByTime(251);
    for (const [r, due] of [
      [a, 1_000],
      [c, 1_100],
    ] as const) {
      expect(r.passedAt).not.toBeNull();
      expect(r.passedAt! - t0).toBeGreaterThanOrEqual(due);
      expect(r.passedAt! - t0).toBeLessThanOrEqual(due + 250);
    }
    expect(b.passedAt).toBeNull();
    expect(d.size).toBe(0);
    // Removing again, or a node never added: nothing.
    d.remove(a);
    d.remove(new Req('never'));
    expect(d.size).toBe(0);
  });

  it('keeps the order of deadlines when a shorter one comes after longer ones, and stops sweeping when empty', () => {
    const d = new Deadlines(100);
    const long = new Req('long');
    const short = new Req('short');
    const mid = new Req('mid');
    d.add(long, 5_000);
    d.add(mid, 2_000);
    d.add(short, 500);
    const order: string[] = [];
    for (const r of [long, mid, short]) r.deadlinePassed = () => order.push(r.name);
    vi.advanceTimersByTime(6_000);
    expect(order).toEqual(['short', 'mid', 'long']);
    expect(vi.getTimerCount()).toBe(0);
    // A new request starts the sweep again.
    const again = new Req('again');
    d.add(again, 300);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(400);
    expect(again.passedAt).not.toBeNull();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('goes on with the others when one request fails to end, and reports the error', () => {
    const errors: unknown[] = [];
    const d = new Deadlines(100, (err) => errors.push(err));
    const bad = new Req('bad');
    const good = new Req('good');
    bad.deadlinePassed = () => {
      throw new Error('socket gone');
    };
    d.add(bad, 200);
    d.add(good, 200);
    vi.advanceTimersByTime(300);
    expect(good.passedAt).not.toBeNull();
    expect(errors.map((e) => (e as Error).message)).toEqual(['socket gone']);
    expect(d.size).toBe(0);
  });
});
