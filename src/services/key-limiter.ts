import type { KeyLimits, KeyRecord } from '../domain/key.js';

export type LimitName = keyof KeyLimits;

/**
 * One fixed window: it starts with the first request (or tokens) counted after the last one
 * ended, and lasts `windowMs`. Simple and exact to report (the reset is the window's end); the
 * price is that a key may spend its whole allowance at the end of one window and again at the
 * start of the next (docs/operations.md).
 */
class Window {
  start = 0;
  count = 0;
  private resetAt = -1;
  private resetText = '0ms';

  roll(now: number, windowMs: number): void {
    if (this.count > 0 && now >= this.start + windowMs) this.count = 0;
  }

  add(now: number, windowMs: number, n: number): void {
    this.roll(now, windowMs);
    if (this.count === 0) this.start = now;
    this.count += n;
  }

  /** Milliseconds until the window is over (0 when nothing is counted). */
  resetMs(now: number, windowMs: number): number {
    return this.count === 0 ? 0 : Math.max(0, this.start + windowMs - now);
  }

  /** `resetMs` as OpenAI writes it, kept for the millisecond: a busy key asks many times in one. */
  reset(now: number, windowMs: number): string {
    const ms = Math.ceil(this.resetMs(now, windowMs));
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
      this.text = String(n);
    }
    return this.text;
  }
}

/** The x-ratelimit-* values last sent for a key. */
class HeaderTexts {
  readonly limitRequests = new CountText();
  readonly remainingRequests = new CountText();
  readonly limitTokens = new CountText();
  readonly remainingTokens = new CountText();
}

/** A key with only a concurrency limit has no x-ratelimit-* header: one empty object for all. */
const NO_HEADERS: Record<string, string> = Object.freeze({});

class KeyState {
  readonly requests = new Window();
  readonly tokens = new Window();
  readonly texts = new HeaderTexts();
  inflight = 0;
  /** When a refusal was last reported (logged), so that it is once per window, not per request. */
  reportedAt = Number.NEGATIVE_INFINITY;
}

export interface Verdict {
  /** The limit that refuses the request, or null when it may go on. */
  refused: LimitName | null;
  /** When refused: how long until it would pass (for Retry-After). */
  retryAfterMs: number;
  /** OpenAI's x-ratelimit-* headers for the limits that apply (empty when only concurrency does). */
  headers: Record<string, string>;
  /** Counted in flight: `leave` must be called once when the request is over. */
  entered: boolean;
  /** A refusal, the key's first in a window: worth one log line. */
  report: boolean;
}

/** How long to wait when a key is at its concurrency limit: unknown, so a short retry. */
export const CONCURRENCY_RETRY_MS = 1000;

/**
 * Per-key rpm, tpm and concurrency, in memory and per daemon: a few map look-ups per request,
 * nothing for keys without limits (the caller skips them). Tokens are charged when the model
 * server reports them, at the end of an answer: a key over its tpm is refused from its next
 * request until the window ends. The clock is the caller's (ms), so tests need no sleeps.
 */
export class KeyLimiter {
  private readonly keys = new Map<string, KeyState>();

  constructor(private readonly windowMs: number) {}

  private state(id: string): KeyState {
    let s = this.keys.get(id);
    if (s === undefined) {
      s = new KeyState();
      this.keys.set(id, s);
    }
    return s;
  }

  /** Checks the key's limits for one more request and, if it passes, counts it. */
  admit(key: KeyRecord, now: number): Verdict {
    const { rpm, tpm, concurrency } = key.limits;
    const w = this.windowMs;
    const s = this.state(key.id);
    s.requests.roll(now, w);
    s.tokens.roll(now, w);
    let refused: LimitName | null = null;
    let retryAfterMs = 0;
    if (rpm !== null && s.requests.count >= rpm) {
      refused = 'rpm';
      retryAfterMs = s.requests.resetMs(now, w);
    } else if (tpm !== null && s.tokens.count >= tpm) {
      refused = 'tpm';
      retryAfterMs = s.tokens.resetMs(now, w);
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
    return { refused, retryAfterMs, headers: this.headers(key.limits, s, now), entered: refused === null, report };
  }

  /** A request admitted by `admit` is over. */
  leave(keyId: string): void {
    const s = this.keys.get(keyId);
    if (s !== undefined && s.inflight > 0) s.inflight--;
  }

  /** Tokens the model server reported for one of the key's answers. */
  chargeTokens(keyId: string, tokens: number, now: number): void {
    if (tokens > 0) this.state(keyId).tokens.add(now, this.windowMs, tokens);
  }

  /** The key is gone (revoked): its counters with it. */
  forget(keyId: string): void {
    this.keys.delete(keyId);
  }

  inflight(keyId: string): number {
    return this.keys.get(keyId)?.inflight ?? 0;
  }

  /**
   * Built as one literal per case (one shape, no property added one by one): they are made per
   * request, and each request keeps its own (it is written with the answer, later). The values
   * are strings kept per key (`HeaderTexts`, and the reset per millisecond): only what changed
   * is formatted again.
   */
  private headers(limits: KeyLimits, s: KeyState, now: number): Record<string, string> {
    const { rpm, tpm } = limits;
    const w = this.windowMs;
    const t = s.texts;
    if (rpm !== null && tpm !== null) {
      return {
        'x-ratelimit-limit-requests': t.limitRequests.of(rpm),
        'x-ratelimit-remaining-requests': t.remainingRequests.of(Math.max(0, rpm - s.requests.count)),
        'x-ratelimit-reset-requests': s.requests.reset(now, w),
        'x-ratelimit-limit-tokens': t.limitTokens.of(tpm),
        'x-ratelimit-remaining-tokens': t.remainingTokens.of(Math.max(0, tpm - s.tokens.count)),
        'x-ratelimit-reset-tokens': s.tokens.reset(now, w),
      };
    }
    if (rpm !== null) {
      return {
        'x-ratelimit-limit-requests': t.limitRequests.of(rpm),
        'x-ratelimit-remaining-requests': t.remainingRequests.of(Math.max(0, rpm - s.requests.count)),
        'x-ratelimit-reset-requests': s.requests.reset(now, w),
      };
    }
    if (tpm !== null) {
      return {
        'x-ratelimit-limit-tokens': t.limitTokens.of(tpm),
        'x-ratelimit-remaining-tokens': t.remainingTokens.of(Math.max(0, tpm - s.tokens.count)),
        'x-ratelimit-reset-tokens': s.tokens.reset(now, w),
      };
    }
    return NO_HEADERS;
  }
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
