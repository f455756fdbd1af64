/**
 * Slows key guessing: an address that sends more than `limit` bad keys within a minute is
 * answered 429 for the rest of that minute. Valid keys are never counted or refused.
 */
export class BadKeyLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs = 60_000,
  ) {}

  blocked(address: string, nowMs: number): boolean {
    if (this.limit === 0) return false;
    const w = this.windows.get(address);
    return w !== undefined && nowMs - w.start < this.windowMs && w.count >= this.limit;
  }

  /** Counts a bad key; true when this one blocks the address (once per window). */
  strike(address: string, nowMs: number): boolean {
    if (this.limit === 0) return false;
    let w = this.windows.get(address);
    if (w === undefined || nowMs - w.start >= this.windowMs) {
      w = { start: nowMs, count: 0 };
      this.windows.set(address, w);
      if (this.windows.size > 10_000) this.prune(nowMs);
    }
    w.count++;
    return w.count === this.limit;
  }

  /** Seconds until the address's window resets. */
  retryAfterSeconds(address: string, nowMs: number): number {
    const w = this.windows.get(address);
    return w === undefined ? 0 : Math.max(1, Math.ceil((w.start + this.windowMs - nowMs) / 1000));
  }

  private prune(nowMs: number): void {
    for (const [a, w] of this.windows) if (nowMs - w.start >= this.windowMs) this.windows.delete(a);
  }
}
