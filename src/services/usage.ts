import { iso } from '../clock.js';
import type { KeyRecord } from '../domain/key.js';

/**
 * Per-key usage gathered in memory on the request path and written in batches: a request
 * never waits for, or causes, a write of its own.
 */
export class UsageTracker {
  private dirty = new Set<KeyRecord>();
  // Formatting a date costs more than the rest of the bookkeeping; requests in the same
  // millisecond share one string.
  private lastMs = Number.NaN;
  private lastIso = '';

  record(key: KeyRecord, nowMs: number, promptTokens: number, completionTokens: number): void {
    if (nowMs !== this.lastMs) {
      this.lastMs = nowMs;
      this.lastIso = iso(nowMs);
    }
    key.lastUsedAt = this.lastIso;
    key.usage.requests += 1;
    key.usage.promptTokens += promptTokens;
    key.usage.completionTokens += completionTokens;
    this.dirty.add(key);
  }

  addTokens(key: KeyRecord, promptTokens: number, completionTokens: number): void {
    key.usage.promptTokens += promptTokens;
    key.usage.completionTokens += completionTokens;
    this.dirty.add(key);
  }

  takeDirty(): KeyRecord[] {
    const out = [...this.dirty];
    this.dirty = new Set();
    return out;
  }

  /** Puts keys back after a failed flush, so the next flush retries them. */
  restore(keys: KeyRecord[]): void {
    for (const k of keys) this.dirty.add(k);
  }
}
