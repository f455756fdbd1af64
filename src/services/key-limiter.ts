import type { KeyLimits, KeyRecord } from '../domain/key.js';
import type { LimitCounts, LimitExchange, LimitSnapshot } from '../store/store.js';
import { type ClusterView, readSnapshot, shareOf } from './limit-shares.js';

export type LimitName = keyof KeyLimits;

/**
 * One fixed window: it starts with the first request (or tokens) counted after the last one
 * ended, and lasts `windowMs`. Simple and exact to report (the reset is the window's end); the
 * price is that a key may spend its whole allowance at the end of one window and again at the
 * start of the next (docs/operations.md). On a shared store windows are aligned to the clock
 * instead (a multiple of `windowMs`), so that every daemon counts the same window.
 *
 * Tokens are charged when answers end, so answers admitted together can take a key past its tpm:
 * what is over is carried into the next windows (`carry`, one limit paid off per window), rather
 * than forgotten when the window ends. Forgotten, a key that ran many answers at once got its
 * concurrency times its answers every window, whatever its tpm.
 */
class Window {
  start = 0;
  count = 0;
  private resetAt = -1;
  private resetText = '0ms';

  constructor(private readonly aligned: boolean) {}

  /** Past the window's end: a new one, with what was counted over `carry` (the limit) in it, if any. */
  roll(now: number, windowMs: number, carry: number | null = null): void {
    if (this.count === 0 || now < this.start + windowMs) return;
    if (carry === null) {
      this.count = 0;
      return;
    }
    const passed = Math.floor((now - this.start) / windowMs);
    this.count = Math.max(0, this.count - carry * passed);
    this.start += passed * windowMs;
  }

  add(now: number, windowMs: number, n: number, carry: number | null = null): void {
    this.roll(now, windowMs, carry);
    if (this.count === 0) this.start = this.aligned ? now - (now % windowMs) : now;
    this.count += n;
  }

  /** Milliseconds until the window is over (0 when nothing is counted). */
  resetMs(now: number, windowMs: number): number {
    return this.count === 0 ? 0 : Math.max(0, this.start + windowMs - now);
  }

  /** Milliseconds until the count is under `limit` again: this window's end, and a window more per limit carried. */
  underMs(now: number, windowMs: number, limit: number): number {
    if (this.count < limit) return 0;
    return this.resetMs(now, windowMs) + (Math.floor(this.count / limit) - 1) * windowMs;
  }

  /** Milliseconds until nothing is counted: the window's end, and a window more per limit carried past it. */
  clearMs(now: number, windowMs: number, limit: number | null): number {
    const ms = this.resetMs(now, windowMs);
    return limit === null || this.count <= limit ? ms : ms + (Math.ceil(this.count / limit) - 1) * windowMs;
  }

  /** `clearMs` as OpenAI writes it, kept for the millisecond: a busy key asks many times in one. */
  reset(now: number, windowMs: number, limit: number | null = null): string {
    const ms = Math.ceil(this.clearMs(now, windowMs, limit));
    if (ms !== this.resetAt) {
      this.resetAt = ms;
      this.resetText = formatReset(ms);
    }
    return this.resetText;
  }
}

/** A count as a header value, remade only when it changes: most of a key's values repeat from one request to the next. */
class CountText {
  private n = -1;
  private text = '';

  of(n: number): string {
    if (n !== this.n) {
      this.n = n;
      this.text = decimal(n);
    }
    return this.text;
  }
}

const THREE_DIGITS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

/**
 * `String(n)`, for a count that is new at each request (what remains of a key's window). V8 keeps
 * the string of every number `String` converts in a cache that outlives the young generation's
 * collections, so each such string was copied to the old generation: 32 bytes a request of a key
 * with an rpm, the most any part of `--ops` promoted (docs/performance.md, "What each optimisation bought"). Made here
 * of groups of three digits: the first group is `String` of a number below 1,000 (a thousand
 * strings at most, cached once), the others come from the table, and the joined string is not
 * cached at all.
 */
export function decimal(n: number): string {
  if (n < 1000 || !Number.isSafeInteger(n)) return String(n);
  const high = Math.floor(n / 1000);
  return decimal(high) + (THREE_DIGITS[n - high * 1000] as string);
}

/** The x-ratelimit-* values last sent for a key. */
class HeaderTexts {
  readonly limitRequests = new CountText();
  readonly remainingRequests = new CountText();
  readonly limitTokens = new CountText();
  readonly remainingTokens = new CountText();
}

/**
 * Response headers as Node's `writeHead` takes them fastest: names and values in turn, in one
 * array (an object's are read by name, megamorphic keyed loads in Node's header loop).
 */
export type HeaderList = readonly string[];

/** A key with only a concurrency limit has no x-ratelimit-* header: one empty list for all. */
const NO_HEADERS: HeaderList = Object.freeze([]);

/** Which x-ratelimit-* trios a key's answers carry: 1 the requests', 2 the tokens', 3 both. */
type HeaderKind = 0 | 1 | 2 | 3;

const REQUEST_TRIO = [
  'x-ratelimit-limit-requests',
  '',
  'x-ratelimit-remaining-requests',
  '',
  'x-ratelimit-reset-requests',
  '',
];
const TOKEN_TRIO = ['x-ratelimit-limit-tokens', '', 'x-ratelimit-remaining-tokens', '', 'x-ratelimit-reset-tokens', ''];

/** A key's header list for `kind`, every header in it, in OpenAI's order (its values are set at each request). */
function headerList(kind: HeaderKind): string[] {
  if (kind === 3) return [...REQUEST_TRIO, ...TOKEN_TRIO];
  if (kind === 1) return [...REQUEST_TRIO];
  return [...TOKEN_TRIO];
}

class KeyState {
  readonly requests: Window;
  readonly tokens: Window;
  readonly texts = new HeaderTexts();
  /** The key's x-ratelimit-* headers (`KeyLimiter.headers`), and which limits they are for. */
  headers: string[] = [];
  headerKind: HeaderKind = 0;
  /** The length of the tail the list was made with (0: none). */
  tailLength = 0;
  inflight = 0;
  /** When a refusal was last reported (logged), so that it is once per window, not per request. */
  reportedAt = Number.NEGATIVE_INFINITY;
  // Shared store only (see KeyLimiter.caps).
  /** The key's limits as last seen, for the capture. */
  limits: KeyLimits | null = null;
  /** Requests asked (admitted or refused) and tokens charged, in all, and as of the last capture. */
  asked = 0;
  askedAtCapture = 0;
  charged = 0;
  chargedAtCapture = 0;
  lastAskedAt = Number.NEGATIVE_INFINITY;
  /**
   * What this daemon promised the others at each capture not yet in a snapshot. A key counted
   * since the last capture was left out of it: a promise of nothing, until that snapshot is read.
   */
  promises: LimitPromise[];
  /** This daemon's caps, worked out once per snapshot, capture and window. */
  caps: Caps | null = null;

  constructor(aligned: boolean, lastCapture: number, window: number) {
    this.requests = new Window(aligned);
    this.tokens = new Window(aligned);
    this.promises = [{ tick: lastCapture, window, requests: 0, tokens: 0, inflight: 0, xRequests: 0, xTokens: 0 }];
  }
}

/**
 * At a capture, a daemon promises to stay within its counts plus `x*` more until the snapshot
 * of that capture is read (in another window: within `x*`): the others split only what nobody
 * promised, so a share given never overlaps one being spent.
 */
interface LimitPromise {
  tick: number;
  window: number;
  requests: number;
  tokens: number;
  inflight: number;
  xRequests: number;
  xTokens: number;
}

/**
 * What this daemon may reach: its promise plus its share of what was left at the last snapshot,
 * and within its promises since (`others*`: the other daemons' counts, for the headers and to
 * tell a full window from a spent share).
 */
interface Caps {
  snapshot: ClusterView | null;
  limits: KeyLimits;
  window: number;
  requests: number;
  tokens: number;
  inflight: number;
  othersRequests: number;
  othersTokens: number;
  /** Requests the other daemons were asked for the key in the period before the snapshot. */
  othersAsked: number;
  /** From the snapshot alone (before the promises since): what the next promise may reach. */
  share: { requests: number; tokens: number; inflight: number };
}

/** `admit`'s answer: read it before the next call, which reuses the object. */
export interface Verdict {
  /** The limit that refuses the request, or null when it may go on. */
  refused: LimitName | null;
  /** When refused: how long until it would pass (for Retry-After). */
  retryAfterMs: number;
  /**
   * OpenAI's x-ratelimit-* headers for the limits that apply (empty when only concurrency does).
   * The key's own list, updated at each of its requests: an answer carries the key's counts as
   * of the key's latest request, its own or one admitted since.
   */
  headers: HeaderList;
  /** Counted in flight: `leave` must be called once when the request is over. */
  entered: boolean;
  /** A refusal, the key's first in a window: worth one log line. */
  report: boolean;
}

/**
 * How often daemons of a shared store exchange their limit counts (ms). Short, so that a burst
 * meets a recent split; one small write and read per daemon per period (docs/scale-out.md).
 */
export const LIMIT_SYNC_MS = 250;

/** Promises kept per key while no snapshot clears them (more than the store's 8-tick look-back). */
const MAX_PROMISES = 10;

/** How long to wait when a key is at its concurrency limit: unknown, so a short retry. */
export const CONCURRENCY_RETRY_MS = 1000;

/**
 * Per-key rpm, tpm and concurrency, in memory: a few map look-ups per request, nothing for keys
 * without limits (the caller skips them). On a store of its own, the daemon's counts are the
 * key's; on a shared store, each daemon stays within its share of the key's limits, worked out
 * from a snapshot of every daemon's counts taken each period (docs/scale-out.md). Tokens are
 * charged when the model server reports them, at the end of an answer: a key over its tpm is
 * refused from its next request until the window ends. The clock is the caller's (ms), so tests
 * need no sleeps.
 */
export class KeyLimiter {
  private readonly keys = new Map<string, KeyState>();
  private readonly shared: boolean;
  private view: ClusterView | null = null;
  private lastCapture = Number.NEGATIVE_INFINITY;
  private lastCaptureWindow = 0;
  /** What `admit` returns, one object for every call: a verdict per request was 64 bytes more for the collector. */
  private readonly verdict: Verdict = {
    refused: null,
    retryAfterMs: 0,
    headers: NO_HEADERS,
    entered: false,
    report: false,
  };

  /**
   * `sync`: the store is shared, and limits hold cluster-wide from snapshots of every daemon's
   * counts taken every `periodMs` (exchange()); windows are then aligned to the clock.
   */
  constructor(
    private readonly windowMs: number,
    private readonly sync: { periodMs: number } | null = null,
  ) {
    this.shared = sync !== null;
  }

  private state(id: string): KeyState {
    let s = this.keys.get(id);
    if (s === undefined) {
      s = new KeyState(this.shared, this.lastCapture, this.lastCaptureWindow);
      this.keys.set(id, s);
    }
    return s;
  }

  /**
   * Checks the key's limits for one more request and, if it passes, counts it. `tail`: headers
   * every answer to the key carries besides (its pack's end), written at the end of the verdict's
   * list, so an answer still takes its headers from one list, with nothing allocated per request.
   */
  admit(key: KeyRecord, now: number, tail: HeaderList | null = null): Readonly<Verdict> {
    const { rpm, tpm, concurrency } = key.limits;
    const w = this.windowMs;
    const s = this.state(key.id);
    s.requests.roll(now, w);
    s.tokens.roll(now, w, tpm);
    let refused: LimitName | null = null;
    let retryAfterMs = 0;
    const c = this.shared ? this.caps(key, s, now) : null;
    if (c !== null) {
      s.asked++;
      s.lastAskedAt = now;
      s.limits = key.limits;
      // Over its share but not the cluster's limit: the next snapshots give it more (its demand counts).
      const soon = this.untilNextShare(now);
      // The cluster's count as far as known: tokens are charged after the answers, so a share
      // can be overspent, and a window spent by the others is spent for this daemon too.
      const spentRequests = rpm !== null && c.othersRequests + s.requests.count >= rpm;
      const spentTokens = tpm !== null && c.othersTokens + s.tokens.count >= tpm;
      if (rpm !== null && (spentRequests || s.requests.count >= c.requests)) {
        refused = 'rpm';
        retryAfterMs = spentRequests ? this.windowLeft(now) : soon;
      } else if (tpm !== null && (spentTokens || s.tokens.count >= c.tokens)) {
        refused = 'tpm';
        // A cluster count past the limit is paid off one limit per window (Window).
        retryAfterMs = spentTokens
          ? this.windowLeft(now) + (Math.floor((c.othersTokens + s.tokens.count) / tpm) - 1) * w
          : soon;
      } else if (concurrency !== null && s.inflight >= c.inflight) {
        refused = 'concurrency';
        retryAfterMs = c.snapshot === null ? soon : CONCURRENCY_RETRY_MS;
      }
    } else if (rpm !== null && s.requests.count >= rpm) {
      refused = 'rpm';
      retryAfterMs = s.requests.resetMs(now, w);
    } else if (tpm !== null && s.tokens.count >= tpm) {
      refused = 'tpm';
      retryAfterMs = s.tokens.underMs(now, w, tpm);
    } else if (concurrency !== null && s.inflight >= concurrency) {
      refused = 'concurrency';
      retryAfterMs = CONCURRENCY_RETRY_MS;
    }
    let report = false;
    if (refused === null) {
      s.requests.add(now, w, 1);
      s.inflight++;
    } else if (now - s.reportedAt >= w) {
      s.reportedAt = now;
      report = true;
    }
    const v = this.verdict;
    v.refused = refused;
    v.retryAfterMs = retryAfterMs;
    v.headers = this.headers(key.limits, s, now, c, tail);
    v.entered = refused === null;
    v.report = report;
    return v;
  }

  private windowLeft(now: number): number {
    return this.windowMs - (now % this.windowMs);
  }

  /** A refusal is counted in the next capture, which is in the snapshot read at the tick after. */
  private untilNextShare(now: number): number {
    const p = this.sync!.periodMs;
    return p - (now % p) + p;
  }

  /**
   * This daemon's caps for the key (shared store). From the last snapshot: what it promised then,
   * plus its share of what nobody promised, shares weighted by each daemon's demand in the period
   * before (plus one, so a daemon with none still gets a little). Every daemon computes the same
   * split and the shares add up to what was left, so the cluster stays within the limit whatever
   * the spread of requests. Then no more than what it promised at the captures since.
   * A snapshot of an ended window: only the promises on top count. In-flight counts carry over.
   * Without a snapshot yet (a daemon just started: three periods at most), it has no share; a key
   * it had not counted at its last capture it promised nothing of, until that capture's snapshot
   * is read (two periods at most). Both refuse with a short wait.
   */
  private caps(key: KeyRecord, s: KeyState, now: number): Caps {
    const v = this.view;
    const window = Math.floor(now / this.windowMs);
    const cached = s.caps;
    if (cached !== null && cached.snapshot === v && cached.limits === key.limits && cached.window === window)
      return cached;
    const { rpm, tpm, concurrency } = key.limits;
    const c: Caps = {
      snapshot: v,
      limits: key.limits,
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
    const k = v.keys.get(key.id);
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
    c.tokens = c.share.tokens = cap(
      tpm,
      k === undefined ? zeros : current ? k.promised.tokens : k.promisedAfter.tokens,
    );
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

  /**
   * What the daemon hands its shared store (Store.shareLimits); null on a store of its own.
   * `anyLimited`: whether any active key of the registry has a limit. While none has and this
   * daemon counts no key, the exchange is skipped: nothing would be admitted through it. When a
   * key gets a limit, its first requests wait for fresh snapshots, as on a daemon just started.
   */
  exchange(anyLimited: () => boolean = () => true): LimitExchange | null {
    if (this.sync === null) return null;
    return {
      periodMs: this.sync.periodMs,
      capture: (now) => this.capture(now),
      received: (snap) => this.received(snap),
      needed: () => {
        if (this.keys.size > 0 || anyLimited()) return true;
        // The ticks skipped leave the view behind, and each daemon's behind a different tick: a
        // share worked out from it would not add up with the others'. None, as on a daemon just
        // started, until the first snapshot read after the pause.
        this.view = null;
        return false;
      },
    };
  }

  /**
   * This daemon's counts, its demand since the last capture, and its promise for each key: its
   * demand in the last period (plus one while it has room to spare, so a key's next request
   * passes at once), within its caps. A key neither asked for nor counted for a whole window is
   * dropped: its next request waits for a snapshot.
   */
  capture(now: number): LimitCounts {
    const w = this.windowMs;
    const window = Math.floor(now / w);
    const tick = Math.floor(now / this.sync!.periodMs);
    const keys: LimitCounts['keys'] = {};
    for (const [id, s] of this.keys) {
      s.requests.roll(now, w);
      s.tokens.roll(now, w, s.limits?.tpm ?? null);
      const asked = s.asked - s.askedAtCapture;
      const charged = s.charged - s.chargedAtCapture;
      s.askedAtCapture = s.asked;
      s.chargedAtCapture = s.charged;
      if (
        s.limits === null ||
        (s.requests.count === 0 && s.tokens.count === 0 && s.inflight === 0 && now - s.lastAskedAt >= w)
      ) {
        this.keys.delete(id);
        continue;
      }
      // Within its share of the snapshot every daemon is reading now, so the promises add up to
      // no more than the limit; the promises since only hold until their snapshots are read.
      const c = this.caps({ id, limits: s.limits } as KeyRecord, s, now);
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
      const xTokens = promise(share.tokens - s.tokens.count, Math.max(charged, asked > 0 ? 1 : 0));
      const xInflight = promise(share.inflight - s.inflight, asked);
      s.promises.push({
        tick,
        window,
        requests: s.requests.count + xRequests,
        tokens: s.tokens.count + xTokens,
        inflight: s.inflight + xInflight,
        xRequests,
        xTokens,
      });
      // Cut off from the store, no snapshot clears them: the others read a daemon's latest row,
      // and stop counting it after a few ticks without one, so only the latest promises matter.
      if (s.promises.length > MAX_PROMISES) s.promises.shift();
      s.caps = null;
      keys[id] = [s.requests.count, s.tokens.count, s.inflight, asked, xRequests, xTokens, xInflight];
    }
    this.lastCapture = tick;
    this.lastCaptureWindow = window;
    return { window, keys };
  }

  /**
   * Every daemon's counts for one tick. A snapshot this daemon is missing from (its write failed)
   * is not used: the others left it out of their split, so it keeps the caps of the one before.
   */
  received(snap: LimitSnapshot): void {
    if (this.view !== null && snap.tick <= this.view.tick) return;
    this.view = readSnapshot(snap) ?? this.view;
  }

  /** A request admitted by `admit` is over. */
  leave(keyId: string): void {
    const s = this.keys.get(keyId);
    if (s !== undefined && s.inflight > 0) s.inflight--;
  }

  /** Tokens the model server reported for one of the key's answers; `tpm`: the key's, what over it is carried. */
  chargeTokens(keyId: string, tokens: number, now: number, tpm: number | null): void {
    if (tokens <= 0) return;
    const s = this.state(keyId);
    s.tokens.add(now, this.windowMs, tokens, tpm);
    s.charged += tokens;
  }

  /** The key is gone (revoked): its counters with it. */
  forget(keyId: string): void {
    this.keys.delete(keyId);
  }

  inflight(keyId: string): number {
    return this.keys.get(keyId)?.inflight ?? 0;
  }

  /**
   * The key's header list with its values as of now. One list per key, not one per request
   * (each request's object was 83 bytes, and more when merged into its answer's): every answer of
   * the key writes it as it is when the answer is written. The values are strings kept per key
   * (`HeaderTexts`, and the reset per millisecond): only what changed is formatted again.
   */
  private headers(limits: KeyLimits, s: KeyState, now: number, c: Caps | null, tail: HeaderList | null): HeaderList {
    const { rpm, tpm } = limits;
    const kind = ((rpm === null ? 0 : 1) | (tpm === null ? 0 : 2)) as HeaderKind;
    if (kind === 0) return tail ?? NO_HEADERS;
    const tailLength = tail === null ? 0 : tail.length;
    // A new list when the key's limits change which trios it has, or its tail its length: an
    // answer already under way keeps the list it was given, with the values of the key's last
    // request before the change.
    if (kind !== s.headerKind || tailLength !== s.tailLength) {
      s.headers = headerList(kind);
      for (let i = 0; i < tailLength; i++) s.headers.push('');
      s.headerKind = kind;
      s.tailLength = tailLength;
    }
    const h = s.headers;
    for (let i = 0, at = h.length - tailLength; i < tailLength; i++) h[at + i] = tail![i]!;
    const w = this.windowMs;
    const t = s.texts;
    // Remaining: the cluster's as far as this daemon knows (the others' counts at the last snapshot).
    if (rpm !== null) {
      const used = s.requests.count + (c === null ? 0 : c.othersRequests);
      h[1] = t.limitRequests.of(rpm);
      h[3] = t.remainingRequests.of(Math.max(0, rpm - used));
      h[5] = s.requests.reset(now, w);
    }
    if (tpm !== null) {
      // The tokens' trio follows the requests' when the key has both.
      const at = rpm === null ? 0 : 6;
      const used = s.tokens.count + (c === null ? 0 : c.othersTokens);
      h[at + 1] = t.limitTokens.of(tpm);
      h[at + 3] = t.remainingTokens.of(Math.max(0, tpm - used));
      h[at + 5] = s.tokens.reset(now, w, tpm);
    }
    return h;
  }
}

function sum(xs: readonly number[]): number {
  let t = 0;
  for (const x of xs) t += x;
  return t;
}

/**
 * A duration as OpenAI writes its reset headers: `20ms`, `1s`, `8.64s`, `6m0s`. Integer
 * arithmetic, not `toFixed`: it runs for every request of a key with limits, and `toFixed` with
 * the conversions around it took about a microsecond.
 */
export function formatReset(ms: number): string {
  const whole = Math.ceil(ms);
  if (whole < 1000) return `${whole}ms`;
  const minutes = Math.floor(whole / 60_000);
  const rest = whole - minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  let frac = rest - seconds * 1000;
  let text = `${seconds}`;
  if (frac !== 0) {
    let digits = 3;
    while (frac % 10 === 0) {
      frac /= 10;
      digits--;
    }
    text += `.${String(frac).padStart(digits, '0')}`;
  }
  return minutes > 0 ? `${minutes}m${text}s` : `${text}s`;
}

/** Retry-After in whole seconds, never 0 (a client would retry at once). */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
