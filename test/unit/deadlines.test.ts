import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type DeadlineNode, Deadlines } from '../../daemon/data-plane/deadlines.js';

class Req implements DeadlineNode {
  dueAt = 0;
  prevDue: DeadlineNode | null = null;
  nextDue: DeadlineNode | null = null;
  heard = 0;
  quietMs = 0;
  heardSeen = 0;
  quietSince = 0;
  passedAt: number | null = null;
  silentAt: number | null = null;
  constructor(readonly name: string) {}
  deadlinePassed(): void {
    this.passedAt = performance.now();
  }
  silencePassed(): void {
    this.silentAt = performance.now();
  }
  /** What a relay does at each read, or when its wait changes. */
  hear(quietMs = this.quietMs): void {
    this.quietMs = quietMs;
    this.heard++;
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

  it('takes no stall of the event loop for a silence: the reads it held back are counted first', () => {
    const d = new Deadlines(100);
    const held = new Req('held');
    const silent = new Req('silent');
    for (const r of [held, silent]) {
      d.add(r, 60_000);
      r.hear(400);
    }
    vi.advanceTimersByTime(100);
    // The loop stalls 1 s: the clock moves, no timer runs, nothing is read.
    const stalled = performance.now();
    const realNow = performance.now.bind(performance);
    vi.spyOn(performance, 'now').mockImplementation(() => realNow() + 1_000);
    // The late sweep judges no silence, though both were quiet for more than 400 ms of clock.
    vi.advanceTimersByTime(100);
    expect([held.silentAt, silent.silentAt]).toEqual([null, null]);
    // Then the read that waited behind it; the next sweep ends only the one still silent.
    held.hear();
    vi.advanceTimersByTime(100);
    expect(held.silentAt).toBeNull();
    expect(silent.silentAt).not.toBeNull();
    expect(silent.silentAt! - stalled).toBeLessThanOrEqual(1_000 + 200);
    expect(d.size).toBe(1);
    vi.restoreAllMocks();
  });

  it('ends a request whose model server is silent for its quiet time, no sooner and at most two periods later', () => {
    const d = new Deadlines(250);
    const silent = new Req('silent');
    const talking = new Req('talking');
    const unwatched = new Req('unwatched');
    for (const r of [silent, talking, unwatched]) d.add(r, 60_000);
    silent.hear(1_000);
    talking.hear(1_000);
    // Heard from at 0 ms, then at 130 ms: the silence is counted from its last read.
    vi.advanceTimersByTime(130);
    const lastRead = performance.now();
    silent.hear();
    for (let t = 0; t < 40; t++) {
      vi.advanceTimersByTime(100);
      talking.hear();
      if (silent.silentAt === null) expect(performance.now() - lastRead).toBeLessThan(1_000 + 500);
    }
    expect(silent.silentAt).not.toBeNull();
    expect(silent.silentAt! - lastRead).toBeGreaterThanOrEqual(1_000);
    expect(silent.silentAt! - lastRead).toBeLessThanOrEqual(1_000 + 500);
    // Out of the list once told, and its deadline never comes; the others are not touched.
    expect(silent.passedAt).toBeNull();
    expect([talking.silentAt, unwatched.silentAt]).toEqual([null, null]);
    expect(d.size).toBe(2);
  });

  it('does not watch a silence while the quiet time is 0 (a paused read), and counts it anew after', () => {
    const d = new Deadlines(100);
    const r = new Req('paused');
    d.add(r, 60_000);
    r.hear(500);
    vi.advanceTimersByTime(200);
    r.hear(0);
    vi.advanceTimersByTime(5_000);
    expect(r.silentAt).toBeNull();
    const resumed = performance.now();
    r.hear(500);
    vi.advanceTimersByTime(1_000);
    expect(r.silentAt).not.toBeNull();
    expect(r.silentAt! - resumed).toBeGreaterThanOrEqual(500);
    expect(r.silentAt! - resumed).toBeLessThanOrEqual(500 + 200);
    expect(d.size).toBe(0);
  });

  it('ends a request at its deadline even while it is heard from', () => {
    const d = new Deadlines(100);
    const r = new Req('chatty');
    d.add(r, 1_000);
    r.hear(300);
    for (let t = 0; t < 15; t++) {
      vi.advanceTimersByTime(100);
      r.hear();
    }
    expect(r.passedAt).not.toBeNull();
    expect(r.silentAt).toBeNull();
  });
});
