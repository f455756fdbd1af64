import type { KeyLimits } from '../domain/key.js';
import type { LimitCounts } from '../store/store.js';
import { type Caps, type KeyState, tokensUsed } from './key-limit-state.js';
import { type ClusterView, shareOf } from './limit-shares.js';

/**
 * What a daemon of a shared store may admit for a key (its caps), and what it promises the
 * others at each capture (docs/scale-out.md, "Limits across daemons").
 */

/** Promises kept per key while no snapshot clears them (more than the store's 8-tick look-back). */
const MAX_PROMISES = 10;

/**
 * This daemon's caps for the key (shared store) in the limit window numbered `window`. From the last snapshot: what it promised then,
 * plus its share of what nobody promised, shares weighted by each daemon's demand in the period
 * before (plus one, so a daemon with none still gets a little). Every daemon computes the same
 * split and the shares add up to what was left, so the cluster stays within the limit whatever
 * the spread of requests. Then no more than what it promised at the captures since.
 * A snapshot of an ended window: only the promises on top count. In-flight counts carry over.
 * Without a snapshot yet (a daemon just started: three periods at most), it has no share; a key
 * it had not counted at its last capture it promised nothing of, until that capture's snapshot
 * is read (two periods at most). Both refuse with a short wait.
 */
export function capsOf(v: ClusterView | null, id: string, limits: KeyLimits, s: KeyState, window: number): Caps {
  const cached = s.caps;
  if (cached !== null && cached.snapshot === v && cached.limits === limits && cached.window === window) return cached;
  const { rpm, tpm, concurrency } = limits;
  const c: Caps = {
    snapshot: v,
    limits,
    window,
    requests: 0,
    tokens: 0,
    inflight: 0,
    othersRequests: 0,
    othersTokens: 0,
    othersAsked: 0,
    share: { requests: 0, tokens: 0, inflight: 0 },
  };
  s.caps = c;
  if (v === null) return c;
  s.promises = s.promises.filter((p) => p.tick > v.tick);
  const k = v.keys.get(id);
  const current = v.window === window;
  const zeros = new Array<number>(v.size).fill(0);
  const weights = k === undefined ? new Array<number>(v.size).fill(1) : k.asked.map((a) => a + 1);
  const cap = (limit: number | null, promised: number[]): number => {
    if (limit === null) return Number.POSITIVE_INFINITY;
    return promised[v.self]! + shareOf(limit - sum(promised), weights, v.self);
  };
  c.requests = c.share.requests = cap(
    rpm,
    k === undefined ? zeros : current ? k.promised.requests : k.promisedAfter.requests,
  );
  c.tokens = c.share.tokens = cap(tpm, k === undefined ? zeros : current ? k.promised.tokens : k.promisedAfter.tokens);
  c.inflight = c.share.inflight = cap(concurrency, k === undefined ? zeros : k.promised.inflight);
  for (const p of s.promises) {
    const same = p.window === window;
    c.requests = Math.min(c.requests, same ? p.requests : p.xRequests);
    c.tokens = Math.min(c.tokens, same ? p.tokens : p.xTokens);
    c.inflight = Math.min(c.inflight, p.inflight);
  }
  if (k !== undefined) c.othersAsked = sum(k.asked) - k.asked[v.self]!;
  if (k !== undefined && current) {
    c.othersRequests = sum(k.requests) - k.requests[v.self]!;
    c.othersTokens = sum(k.tokens) - k.tokens[v.self]!;
  }
  return c;
}

/** When a capture is taken: its tick, and the limit window it falls in. */
export interface CaptureTime {
  readonly tick: number;
  readonly window: number;
}

/**
 * This daemon's promise for a key at a capture (`at`), added to its promises, and the key's row
 * of the capture: its counts, `asked` (requests since the last capture), and how far past them
 * it promised to stay. `charged`: its token demand since the last capture.
 */
export function promiseOf(
  s: KeyState,
  c: Caps,
  at: CaptureTime,
  asked: number,
  charged: number,
): LimitCounts['keys'][string] {
  const { tick, window } = at;
  // Within its share of the snapshot every daemon is reading now (`c`), so the promises add up
  // to no more than the limit; the promises since only hold until their snapshots are read.
  const { share } = c;
  // One to spare while there is room for two, or while no other daemon wants the key: a
  // spare kept when room is scarce would starve a daemon that asks.
  const spare = (room: number): number => (room >= 2 || (room >= 1 && c.othersAsked === 0) ? 1 : 0);
  // Its demand, and half of the room beyond it: kept to until the snapshot of this capture is
  // read, the promise is all a daemon may admit in the meantime, so a promise of the demand
  // alone refused any rise in rate, however far below the limit. The other half stays
  // unpromised, for the next split to give to whichever daemon asks.
  const promise = (room: number, demand: number): number => {
    if (room === Number.POSITIVE_INFINITY) return 0;
    const wanted = demand + spare(room);
    return Math.max(0, Math.min(room, wanted + Math.max(0, Math.floor((room - wanted) / 2))));
  };
  const xRequests = promise(share.requests - s.requests.count, asked);
  const xTokens = promise(share.tokens - tokensUsed(s), Math.max(charged, asked > 0 ? 1 : 0));
  const xInflight = promise(share.inflight - s.inflight, asked);
  s.promises.push({
    tick,
    window,
    requests: s.requests.count + xRequests,
    tokens: tokensUsed(s) + xTokens,
    inflight: s.inflight + xInflight,
    xRequests,
    xTokens,
  });
  // Cut off from the store, no snapshot clears them: the others read a daemon's latest row,
  // and stop counting it after a few ticks without one, so only the latest promises matter.
  if (s.promises.length > MAX_PROMISES) s.promises.shift();
  s.caps = null;
  return [s.requests.count, tokensUsed(s), s.inflight, asked, xRequests, xTokens, xInflight];
}

function sum(xs: readonly number[]): number {
  let t = 0;
  for (const x of xs) t += x;
  return t;
}
