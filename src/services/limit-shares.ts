import type { LimitSnapshot } from '../store/store.js';

/**
 * How daemons sharing one store split what is left of a key's limit (docs/scale-out.md, "Limits
 * across daemons"). Every daemon reads the same snapshot of everyone's counts, so every daemon
 * computes the same split: whole units, in proportion to the weights, the remainder by largest
 * fraction (ties to the lower index). The shares add up to exactly `free`, which is what keeps the
 * cluster's total within the limit without asking the database per request.
 */
export function shareOf(free: number, weights: readonly number[], self: number): number {
  if (free <= 0) return 0;
  let total = 0;
  for (const w of weights) total += w;
  if (total <= 0) return 0;
  const base = (i: number): number => Math.floor((free * weights[i]!) / total);
  // The fraction each share lost to the floor, as an integer over `total` (exact, no rounding).
  const lost = (i: number): number => free * weights[i]! - base(i) * total;
  let given = 0;
  for (let i = 0; i < weights.length; i++) given += base(i);
  const left = free - given;
  const mine = lost(self);
  // Rank of this daemon among those that lost more (or as much, with a lower index).
  let ahead = 0;
  for (let i = 0; i < weights.length; i++) {
    const l = lost(i);
    if (l > mine || (l === mine && i < self)) ahead++;
  }
  return base(self) + (ahead < left ? 1 : 0);
}

/**
 * A snapshot as the limiter reads it: daemons in one order, and per key, one array per count
 * (requests and tokens of the snapshot's window), and what each daemon promised (totals).
 */
export interface ClusterView {
  tick: number;
  window: number;
  self: number;
  size: number;
  keys: Map<string, KeyView>;
}

export interface KeyView {
  requests: number[];
  tokens: number[];
  asked: number[];
  promised: { requests: number[]; tokens: number[]; inflight: number[] };
  /** In another window than the snapshot's: only what was promised on top counts. */
  promisedAfter: { requests: number[]; tokens: number[] };
}

/**
 * Every daemon's counts for one tick, as arrays. A snapshot this daemon is missing from (its
 * write failed) gives null: the others left it out of their split, so it keeps the one before.
 */
export function readSnapshot(snap: LimitSnapshot): ClusterView | null {
  const nodes = [...snap.nodes.keys()].sort();
  const self = nodes.indexOf(snap.self);
  if (self < 0) return null;
  const size = nodes.length;
  const window = snap.nodes.get(snap.self)!.window;
  const keys = new Map<string, KeyView>();
  const zeros = (): number[] => new Array<number>(size).fill(0);
  nodes.forEach((n, i) => {
    const counts = snap.nodes.get(n)!;
    // A daemon still in the window before (it captured just before the boundary): its counts
    // are of that window, only its promise on top counts in this one.
    const sameWindow = counts.window === window;
    for (const [id, [requests, tokens, inflight, asked, xRequests, xTokens, xInflight]] of Object.entries(
      counts.keys,
    )) {
      let k = keys.get(id);
      if (k === undefined) {
        k = {
          requests: zeros(),
          tokens: zeros(),
          asked: zeros(),
          promised: { requests: zeros(), tokens: zeros(), inflight: zeros() },
          promisedAfter: { requests: zeros(), tokens: zeros() },
        };
        keys.set(id, k);
      }
      if (sameWindow) {
        k.requests[i] = requests;
        k.tokens[i] = tokens;
      }
      k.asked[i] = asked;
      k.promised.requests[i] = (sameWindow ? requests : 0) + xRequests;
      k.promised.tokens[i] = (sameWindow ? tokens : 0) + xTokens;
      k.promised.inflight[i] = inflight + xInflight;
      k.promisedAfter.requests[i] = xRequests;
      k.promisedAfter.tokens[i] = xTokens;
    }
  });
  return { tick: snap.tick, window, self, size, keys };
}
