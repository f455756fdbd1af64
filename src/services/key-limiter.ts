import type { KeyLimits, KeyRecord } from '../domain/key.js';
import type { LimitCounts, LimitExchange, LimitSnapshot } from '../store/store.js';
import { type Caps, KeyState, tokensUsed } from './key-limit-state.js';
import { type CaptureTime, capsOf, promiseOf } from './limit-caps.js';
import { type HeaderList, KeyHeaders, NO_HEADERS } from './limit-headers.js';
import { type ClusterView, readSnapshot } from './limit-shares.js';

export type { HeaderList } from './limit-headers.js';
export { formatReset, retryAfterSeconds } from './limit-header-text.js';

export type LimitName = keyof KeyLimits;

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

/** `reserve`'s answer: read it before the next call, which reuses the object. */
export interface Reservation {
  /** The key is at its tpm, counting its reservations: refuse the request (429, `retryAfterMs`). */
  refused: boolean;
  /** Tokens reserved, to give back with `release` when the answer is over (0: nothing reserved). */
  tokens: number;
  retryAfterMs: number;
  /** The key's x-ratelimit-* headers, counting the reservation. */
  headers: HeaderList;
}

/**
 * How often daemons of a shared store exchange their limit counts (ms). Short, so that a burst
 * meets a recent split; one small write and read per daemon per period (docs/scale-out.md).
 */
export const LIMIT_SYNC_MS = 250;

/**
 * The completion reserved for an answer whose request set no cap (neither max_completion_tokens
 * nor max_tokens), when the key's tpm has that much left: a long answer's worth. The model server
 * may write more (Ollama has no cap of its own; vLLM stops at the context's end), and what it
 * writes past the reservation is charged when the answer ends and carried (Window); a reservation
 * of all that is left of the tpm instead would have let a key with a large tpm run one uncapped
 * answer at a time. A client that sets max_tokens reserves exactly its cap.
 */
export const UNCAPPED_RESERVE = 4096;

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
  private readonly headers: KeyHeaders;
  private readonly shared: boolean;
  private view: ClusterView | null = null;
  private lastCapture = Number.NEGATIVE_INFINITY;
  private lastCaptureWindow = 0;
  /** What `reserve` returns, one object for every call. */
  private readonly reservation: Reservation = { refused: false, tokens: 0, retryAfterMs: 0, headers: NO_HEADERS };
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
    this.headers = new KeyHeaders(windowMs);
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
      const spentTokens = tpm !== null && c.othersTokens + tokensUsed(s) >= tpm;
      if (rpm !== null && (spentRequests || s.requests.count >= c.requests)) {
        refused = 'rpm';
        retryAfterMs = spentRequests ? this.windowLeft(now) : soon;
      } else if (tpm !== null && (spentTokens || tokensUsed(s) >= c.tokens)) {
        refused = 'tpm';
        retryAfterMs = this.sharedTokenWait(s, c, tpm, now, soon);
      } else if (concurrency !== null && s.inflight >= c.inflight) {
        refused = 'concurrency';
        retryAfterMs = c.snapshot === null ? soon : CONCURRENCY_RETRY_MS;
      }
    } else if (rpm !== null && s.requests.count >= rpm) {
      refused = 'rpm';
      retryAfterMs = s.requests.resetMs(now, w);
    } else if (tpm !== null && tokensUsed(s) >= tpm) {
      refused = 'tpm';
      retryAfterMs = this.tokenWait(s, tpm, now);
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
    v.headers = this.headers.of(key.limits, s, now, c, tail);
    v.entered = refused === null;
    v.report = report;
    return v;
  }

  /**
   * How long a key at its tpm waits (one daemon): past it on what was charged, until that is paid
   * off (Window.underMs); there only by what its answers under way reserved, a short retry, since
   * each gives back what it did not use when it ends.
   */
  private tokenWait(s: KeyState, tpm: number, now: number): number {
    return s.tokens.count >= tpm ? s.tokens.underMs(now, this.windowMs, tpm) : CONCURRENCY_RETRY_MS;
  }

  /** `tokenWait` on a shared store: the cluster's charged count, else this daemon's share, else its reservations. */
  private sharedTokenWait(s: KeyState, c: Caps, tpm: number, now: number, soon: number): number {
    const charged = c.othersTokens + s.tokens.count;
    // A cluster count past the limit is paid off one limit per window (Window).
    if (charged >= tpm) return this.windowLeft(now) + (Math.floor(charged / tpm) - 1) * this.windowMs;
    if (s.tokens.count >= c.tokens) return soon;
    return Math.max(soon, CONCURRENCY_RETRY_MS);
  }

  /**
   * Reserves the tokens an answer may take against the key's tpm, when its request is known (the
   * body read): `prompt`, the estimate of its prompt, and `cap`, its completion's cap, or, with no
   * cap, UNCAPPED_RESERVE, within what is left of the key's tpm. A key already
   * at its tpm, counting what its answers under way reserved, is refused, so a burst of requests
   * at once is bounded by their reservations, not admitted whole before any answer is charged. The
   * reservation is given back with `release` when the answer is over, and its real usage charged
   * (`chargeTokens`). A key without a tpm reserves nothing (`tokens` 0).
   */
  reserve(key: KeyRecord, prompt: number, cap: number | null, now: number): Readonly<Reservation> {
    const r = this.reservation;
    const tpm = key.limits.tpm;
    r.refused = false;
    r.tokens = 0;
    r.retryAfterMs = 0;
    if (tpm === null) return r;
    const w = this.windowMs;
    const s = this.state(key.id);
    s.tokens.roll(now, w, tpm);
    const used = tokensUsed(s);
    let room = tpm - used;
    if (this.shared) {
      const c = this.caps(key, s, now);
      s.limits = key.limits;
      room = Math.min(room - c.othersTokens, c.tokens - used);
      if (room <= 0) r.retryAfterMs = this.sharedTokenWait(s, c, tpm, now, this.untilNextShare(now));
      r.headers = this.headers.of(key.limits, s, now, c);
    } else if (room <= 0) r.retryAfterMs = this.tokenWait(s, tpm, now);
    if (room <= 0) {
      r.refused = true;
      if (!this.shared) r.headers = this.headers.of(key.limits, s, now, null);
      return r;
    }
    r.tokens = prompt + (cap ?? Math.max(0, Math.min(UNCAPPED_RESERVE, room - prompt)));
    s.reserved += r.tokens;
    s.reservedAsked += r.tokens;
    r.headers = this.headers.of(key.limits, s, now, this.shared ? this.caps(key, s, now) : null);
    return r;
  }

  /** An answer that reserved `tokens` is over: they no longer count (its usage is charged apart). */
  release(keyId: string, tokens: number): void {
    const s = this.keys.get(keyId);
    if (s === undefined || tokens <= 0) return;
    s.reserved = Math.max(0, s.reserved - tokens);
  }

  private windowLeft(now: number): number {
    return this.windowMs - (now % this.windowMs);
  }

  /** A refusal is counted in the next capture, which is in the snapshot read at the tick after. */
  private untilNextShare(now: number): number {
    const p = this.sync!.periodMs;
    return p - (now % p) + p;
  }

  /** This daemon's caps for the key from the last snapshot (shared store; capsOf). */
  private caps(key: KeyRecord, s: KeyState, now: number): Caps {
    return capsOf(this.view, key.id, key.limits, s, Math.floor(now / this.windowMs));
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
    const at: CaptureTime = { tick, window };
    const keys: LimitCounts['keys'] = {};
    for (const [id, s] of this.keys) {
      s.requests.roll(now, w);
      s.tokens.roll(now, w, s.limits?.tpm ?? null);
      const asked = s.asked - s.askedAtCapture;
      // Tokens reserved since the last capture are demand too: the answers under way want them.
      const charged = Math.max(s.charged - s.chargedAtCapture, s.reservedAsked - s.reservedAtCapture);
      s.askedAtCapture = s.asked;
      s.chargedAtCapture = s.charged;
      s.reservedAtCapture = s.reservedAsked;
      if (
        s.limits === null ||
        (s.requests.count === 0 &&
          s.tokens.count === 0 &&
          s.reserved === 0 &&
          s.inflight === 0 &&
          now - s.lastAskedAt >= w)
      ) {
        this.keys.delete(id);
        continue;
      }
      const c = capsOf(this.view, id, s.limits, s, window);
      keys[id] = promiseOf(s, c, at, asked, charged);
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
}
