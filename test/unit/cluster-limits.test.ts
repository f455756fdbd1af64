/**
 * Per-key limits across daemons of one shared store (docs/scale-out.md), without the database:
 * three KeyLimiters exchange their counts through an in-memory table exactly as PostgresStore
 * does (each tick writes its counts for the tick and reads everyone's of the tick before), on an
 * injected clock. Whatever the spread of requests, the cluster admits at most the limit per window.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type KeyLimits, type KeyRecord, noLimits } from '../../src/domain/key.js';
import { KeyLimiter } from '../../src/services/key-limiter.js';
import { headerRecord, viewVerdict } from '../helpers/header-list.js';
import { shareOf } from '../../src/services/limit-shares.js';
import type { LimitCounts, LimitExchange } from '../../src/store/store.js';

const T0 = 1_800_000_000_000;
const PERIOD = 250;
const WINDOW = 4000;
const key = (limits: Partial<KeyLimits>, id = 'k1'): KeyRecord =>
  ({ id, limits: { ...noLimits(), ...limits } }) as KeyRecord;

/** Daemons and the table they share; `step` moves the clock, ticking them on each multiple of PERIOD. */
class Cluster {
  readonly nodes: KeyLimiter[];
  private readonly table = new Map<number, Map<string, LimitCounts>>();
  now = T0;
  /** Whether each daemon's registry has a limited key (PostgresStore skips a tick whose exchange is not needed). */
  readonly limited: boolean[];
  private readonly exchanges: LimitExchange[];
  constructor(
    size: number,
    private readonly down = new Set<number>(),
  ) {
    this.nodes = Array.from({ length: size }, () => new KeyLimiter(WINDOW, { periodMs: PERIOD }));
    this.limited = this.nodes.map(() => true);
    this.exchanges = this.nodes.map((n, i) => n.exchange(() => this.limited[i]!)!);
  }

  /** Whether daemon i writes and reads a row at this tick. */
  exchanging(i: number): boolean {
    return !this.down.has(i) && this.exchanges[i]!.needed!();
  }

  step(ms: number): void {
    const to = this.now + ms;
    for (let t = this.now - (this.now % PERIOD) + PERIOD; t <= to; t += PERIOD) {
      this.now = t;
      const tick = t / PERIOD;
      const row = new Map<string, LimitCounts>();
      const exchanging = this.nodes.map((_, i) => this.exchanging(i));
      this.nodes.forEach((n, i) => {
        if (exchanging[i]) row.set(`node-${i}`, n.capture(t));
      });
      this.table.set(tick, row);
      // As PostgresStore reads them: each daemon's latest row of the last 8 ticks.
      const seen = new Map<string, LimitCounts>();
      for (let t = tick - 8; t <= tick - 1; t++) for (const [n, counts] of this.table.get(t) ?? []) seen.set(n, counts);
      this.nodes.forEach((n, i) => {
        if (exchanging[i]) n.received({ tick: tick - 1, self: `node-${i}`, nodes: seen });
      });
    }
    this.now = to;
  }
}

describe('shareOf', () => {
  it('splits what is left in whole units that add up to it, by weight, the remainder by largest fraction then index', () => {
    const split = (free: number, w: number[]): number[] => w.map((_, i) => shareOf(free, w, i));
    expect(split(10, [1, 1, 1])).toEqual([4, 3, 3]);
    expect(split(1, [1, 1, 1])).toEqual([1, 0, 0]);
    expect(split(1, [1, 5, 1])).toEqual([0, 1, 0]);
    expect(split(60, [1, 1, 4])).toEqual([10, 10, 40]);
    expect(split(0, [1, 1])).toEqual([0, 0]);
    expect(split(-3, [1, 1])).toEqual([0, 0]);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: 1, maxLength: 8 }),
        (free, w) => {
          const s = split(free, w);
          return s.reduce((a, b) => a + b, 0) === free && s.every((x) => x >= 0);
        },
      ),
    );
  });
});

describe('KeyLimiter on a shared store', () => {
  it('three daemons, requests spread at random: at most rpm admitted per window in total, and nearly all of it used', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 40 })), {
          minLength: 50,
          maxLength: 600,
        }),
        (rpm, plan) => {
          const c = new Cluster(3);
          const k = key({ rpm });
          const admitted = new Map<number, number>();
          for (const [node, gap] of plan) {
            c.step(gap);
            const v = c.nodes[node]!.admit(k, c.now);
            if (v.refused === null) {
              c.nodes[node]!.leave(k.id);
              const w = Math.floor(c.now / WINDOW);
              admitted.set(w, (admitted.get(w) ?? 0) + 1);
            } else {
              expect(v.refused).toBe('rpm');
              expect(v.retryAfterMs).toBeGreaterThan(0);
            }
          }
          for (const n of admitted.values()) expect(n).toBeLessThanOrEqual(rpm);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('all traffic on one daemon: its share grows with its demand, so the key gets its whole rpm within a few ticks', () => {
    const c = new Cluster(3);
    const k = key({ rpm: 90 });
    let admitted = 0;
    for (let i = 0; i < 400; i++) {
      if (c.nodes[1]!.admit(k, c.now).refused === null) admitted++;
      c.step(5);
    }
    // 400 asks over 2 s of one 4 s window.
    expect(admitted).toBe(90);
    const refused = c.nodes[1]!.admit(k, c.now);
    expect(viewVerdict(refused)).toMatchObject({ refused: 'rpm', headers: { 'x-ratelimit-remaining-requests': '0' } });
    // The window is full: the wait is until it ends, not a tick.
    expect(refused.retryAfterMs).toBe(WINDOW - (c.now % WINDOW));
  });

  it('a key far below its limits is not refused when its rate jumps, on one daemon or spread over three', () => {
    // A regression: each daemon promised only its last period's demand plus one, and kept to that
    // promise until the next snapshot, so a rate that rose between two ticks was refused though the
    // limit was a million times the load (a PostgreSQL daemon refused half of a bench's requests).
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 400 })), {
          minLength: 10,
          maxLength: 24,
        }),
        (size, periods) => {
          const c = new Cluster(size);
          const k = key({ rpm: 1e9, tpm: 1e9, concurrency: 1e9 });
          // Snapshots that count the key on every daemon (as after a daemon's start).
          for (let n = 0; n < size; n++) c.nodes[n]!.admit(k, c.now);
          c.step(3 * PERIOD);
          for (let n = 0; n < size; n++) {
            c.nodes[n]!.admit(k, c.now);
            c.nodes[n]!.leave(k.id);
          }
          c.step(PERIOD);
          // A plain throw, not expect(): it runs a million times a property run, and fast-check
          // reports the throw with the shrunk case all the same.
          const ask = (n: KeyLimiter): void => {
            const { refused } = n.admit(k, c.now);
            if (refused !== null) throw new Error(`refused far below the limits: ${JSON.stringify(refused)}`);
            n.leave(k.id);
            n.chargeTokens(k.id, 10, c.now, k.limits.tpm);
          };
          // Then each period one daemon gets a burst of any size, from 0 to 400 requests, and the
          // others one each, as behind a load balancer (a daemon that has not seen a key for a
          // whole window waits for a snapshot again: docs/scale-out.md).
          for (const [node, burst] of periods) {
            c.nodes.forEach((n, i) => {
              if (i !== node % size) ask(n);
            });
            for (let i = 0; i < burst; i++) {
              ask(c.nodes[node % size]!);
              c.step(PERIOD / 400);
            }
            c.step(PERIOD);
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it("tokens and concurrency hold cluster-wide the same way; the others' counts show in the remaining headers", () => {
    const c = new Cluster(2);
    const t = key({ tpm: 100 }, 't');
    c.step(3 * PERIOD);
    c.nodes[0]!.admit(t, c.now);
    c.nodes[1]!.admit(t, c.now);
    c.step(2 * PERIOD);
    expect(c.nodes[0]!.admit(t, c.now).refused).toBeNull();
    c.nodes[0]!.leave('t');
    c.nodes[0]!.chargeTokens('t', 80, c.now, 100);
    c.step(2 * PERIOD);
    // Node 1 sees node 0's 80 tokens: 20 left in the cluster.
    const on1 = c.nodes[1]!.admit(t, c.now);
    expect(headerRecord(on1.headers)['x-ratelimit-remaining-tokens']).toBe('20');
    c.nodes[1]!.leave('t');
    c.nodes[1]!.chargeTokens('t', 30, c.now, 100);
    c.step(2 * PERIOD);
    expect(viewVerdict(c.nodes[0]!.admit(t, c.now))).toMatchObject({
      refused: 'tpm',
      headers: { 'x-ratelimit-remaining-tokens': '0' },
    });
    expect(c.nodes[1]!.admit(t, c.now).refused).toBe('tpm');

    const q = key({ concurrency: 3 }, 'q');
    let inflight = 0;
    for (let i = 0; i < 40; i++) {
      const n = c.nodes[i % 2]!;
      if (n.admit(q, c.now).refused === null) inflight++;
      c.step(20);
    }
    expect(inflight).toBe(3);
    expect(c.nodes[0]!.inflight('q') + c.nodes[1]!.inflight('q')).toBe(3);
  });

  it('reservations hold cluster-wide: a burst spread over three daemons reserves at most the tpm and one answer more', () => {
    const c = new Cluster(3);
    const t = key({ tpm: 300 }, 'burst');
    c.step(3 * PERIOD);
    for (const n of c.nodes) n.admit(t, c.now);
    c.step(2 * PERIOD);
    // Many answers of 40 at once, round robin, in several ticks; none ends.
    let reserved = 0;
    for (let i = 0; i < 120; i++) {
      const n = c.nodes[i % 3]!;
      if (n.admit(t, c.now).refused === null) {
        const r = n.reserve(t, 30, 10, c.now);
        if (!r.refused) reserved += r.tokens;
      }
      if (i % 10 === 9) c.step(PERIOD);
    }
    expect(reserved).toBeGreaterThan(0);
    // Each daemon stops at its share: the cluster at the tpm, and the last answer of each past it at most.
    expect(reserved).toBeLessThanOrEqual(300 + 3 * 40);
    // The others see the reservations: in the headers, and as spent tokens.
    c.step(2 * PERIOD);
    expect(headerRecord(c.nodes[0]!.admit(t, c.now).headers)['x-ratelimit-remaining-tokens']).toBe('0');
  });

  it('no key limited: no daemon exchanges; a key limited again after a long pause still gets at most its rpm per window', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 100 }),
        // How long no key has a limit (a window and a tick: every daemon's counts are dropped), and
        // when each daemon hears that the key has one again (a daemon that has not heard serves it
        // without limits, so its requests are not asked here).
        fc.integer({ min: WINDOW + PERIOD, max: 10 * WINDOW }),
        fc.array(fc.integer({ min: 0, max: 3 * PERIOD }), { minLength: 3, maxLength: 3 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 40 })), {
          minLength: 50,
          maxLength: 400,
        }),
        (rpm1, rpm2, pause, heard, plan) => {
          const c = new Cluster(3);
          const admitted = new Map<number, number>();
          const ask = (node: number, k: KeyRecord): void => {
            if (c.nodes[node]!.admit(k, c.now).refused === null) {
              c.nodes[node]!.leave(k.id);
              const w = Math.floor(c.now / WINDOW);
              admitted.set(w, (admitted.get(w) ?? 0) + 1);
            }
          };
          const before = key({ rpm: rpm1 });
          for (const [node, gap] of plan.slice(0, 30)) {
            c.step(gap);
            ask(node, before);
          }
          // The limit is removed: requests pass without the limiter, and once each daemon's
          // counts are dropped (a window without asks) its ticks exchange nothing.
          c.limited.fill(false);
          c.step(pause);
          expect([0, 1, 2].map((i) => c.exchanging(i))).toEqual([false, false, false]);
          const startedAt = c.now;
          const firstWindow = Math.floor(c.now / WINDOW);
          for (const w of admitted.keys()) if (w >= firstWindow) admitted.delete(w);
          const after = key({ rpm: rpm2 });
          for (const [node, gap] of plan) {
            c.step(gap);
            heard.forEach((at, i) => {
              if (c.now - startedAt >= at) c.limited[i] = true;
            });
            if (c.limited[node]) ask(node, after);
          }
          for (const [w, n] of admitted) expect(n).toBeLessThanOrEqual(w >= firstWindow ? rpm2 : rpm1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a limit set again after a pause: the key waits for fresh snapshots, as on a daemon just started', () => {
    const c = new Cluster(2);
    const k = key({ rpm: 10 });
    c.step(3 * PERIOD);
    c.step(2 * PERIOD);
    expect(c.nodes[0]!.admit(k, c.now).refused).toBe('rpm');
    c.step(2 * PERIOD);
    expect(c.nodes[0]!.admit(k, c.now).refused).toBeNull();
    c.nodes[0]!.leave('k1');
    c.limited.fill(false);
    // Counted within the window: that daemon keeps exchanging until its counts are dropped.
    c.step(PERIOD);
    expect([0, 1].map((i) => c.exchanging(i))).toEqual([true, false]);
    c.step(WINDOW + PERIOD);
    expect([0, 1].map((i) => c.exchanging(i))).toEqual([false, false]);
    c.step(5 * WINDOW);
    c.limited.fill(true);
    // Just after the first tick that exchanges again: no share until the snapshots of its captures are read.
    c.step(PERIOD - (c.now % PERIOD) + 1);
    expect(c.nodes[0]!.admit(k, c.now)).toMatchObject({ refused: 'rpm', retryAfterMs: 2 * PERIOD - 1 });
    c.step(PERIOD);
    expect(c.nodes[0]!.admit(k, c.now).refused).toBe('rpm');
    // Once the wait it was told is over, it is served.
    c.step(PERIOD - 1);
    expect(viewVerdict(c.nodes[0]!.admit(k, c.now))).toMatchObject({
      refused: null,
      headers: { 'x-ratelimit-remaining-requests': '9' },
    });
  });

  it('a daemon just started, or a key it has not counted yet, is refused with a short wait until a snapshot counts it', () => {
    const c = new Cluster(2);
    const k = key({ rpm: 10 });
    c.step(1);
    // No snapshot yet: the wait is until the snapshot that counts this ask.
    expect(viewVerdict(c.nodes[0]!.admit(k, c.now))).toMatchObject({
      refused: 'rpm',
      retryAfterMs: 2 * PERIOD - 1,
      headers: { 'x-ratelimit-remaining-requests': '10' },
    });
    // The first tick reads nothing (no tick before it); the second reads the first's counts, but
    // its own capture was made before, with no share to promise from; the third serves.
    c.step(2 * PERIOD);
    expect(c.nodes[0]!.admit(k, c.now).refused).toBe('rpm');
    c.step(PERIOD);
    expect(c.nodes[0]!.admit(k, c.now).refused).toBeNull();
    // Node 1 never counted the key: it promised nothing of it at the capture before.
    expect(c.nodes[1]!.admit(k, c.now).refused).toBe('rpm');
    c.step(PERIOD);
    expect(viewVerdict(c.nodes[1]!.admit(k, c.now))).toMatchObject({
      refused: null,
      headers: { 'x-ratelimit-remaining-requests': '9' },
    });
    // Each keeps one to spare while it has room: the next request passes at once.
    c.step(2 * PERIOD);
    expect(c.nodes[0]!.admit(k, c.now).refused).toBeNull();
    expect(c.nodes[1]!.admit(k, c.now).refused).toBeNull();
  });

  it('a daemon whose counts do not reach the store keeps to its last caps; the others split without it', () => {
    const down = new Set<number>();
    const c = new Cluster(3, down);
    const k = key({ rpm: 30 });
    c.step(3 * PERIOD);
    const admitted = [0, 0, 0];
    const ask = (n: number): void => {
      if (c.nodes[n]!.admit(k, c.now).refused === null) admitted[n]!++;
    };
    for (let i = 0; i < 30; i++) {
      ask(i % 3);
      c.step(10);
    }
    down.add(2);
    const before = admitted[2]!;
    for (let i = 0; i < 240; i++) {
      ask(i % 3);
      c.step(10);
    }
    expect(Math.floor(c.now / WINDOW)).toBe(Math.floor((T0 + 3 * PERIOD) / WINDOW));
    // The failure mode docs/scale-out.md states: the others no longer count the cut-off daemon,
    // which keeps to what it had (its promise and share): the cluster may pass the limit by that.
    const cutOff = admitted[2]! - before;
    expect(cutOff).toBeGreaterThan(0);
    expect(cutOff).toBeLessThanOrEqual(Math.ceil(30 / 3) + 1);
    expect(admitted[0]! + admitted[1]! + before).toBeLessThanOrEqual(30);
  });
});
