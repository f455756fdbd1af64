import { formatReset } from './limit-header-text.js';

/**
 * One fixed window: it starts with the first request (or tokens) counted after the last one
 * ended, and lasts `windowMs`. Simple and exact to report (the reset is the window's end); the
 * price is that a key may spend its whole allowance at the end of one window and again at the
 * start of the next (docs/operations.md). On a shared store windows are aligned to the clock
 * instead (a multiple of `windowMs`), so that every daemon counts the same window.
 *
 * Tokens are reserved when a request is admitted (`KeyLimiter.reserve`) and charged when its
 * answer ends, so an answer that takes more than it reserved (a prompt longer than its estimate)
 * can still take a key past its tpm: what is over is carried into the next windows (`carry`, one
 * limit paid off per window), rather than forgotten when the window ends. Forgotten, a key that
 * ran many answers at once got its concurrency times its answers every window, whatever its tpm.
 */
export class Window {
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
