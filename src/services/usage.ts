import { iso } from '../clock.js';
import type { KeyRecord } from '../domain/key.js';

/**
 * Per-key usage gathered in memory on the request path and written in batches: a request
 * never waits for, or causes, a write of its own.
 */
export class UsageTracker {
  private dirty = new Set<KeyRecord>();
  // Formatting a date cost more than the rest of the bookkeeping: the text up to the second is
  // made once per second, and each request adds its milliseconds.
  private lastSecond = Number.NaN;
  private secondText = '';

  record(key: KeyRecord, nowMs: number, promptTokens: number, completionTokens: number): void {
    const second = Math.floor(nowMs / 1000);
    if (second !== this.lastSecond) {
      this.lastSecond = second;
      this.secondText = iso(second * 1000).slice(0, -4);
    }
    const ms = nowMs - second * 1000;
    key.lastUsedAt = `${this.secondText}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`;
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
