import { iso } from '../clock.js';
import type { KeyRecord } from '../domain/key.js';

/**
 * Per-key usage gathered in memory on the request path and written in batches: a request
 * never waits for, or causes, a write of its own.
 */
export class UsageTracker {
  private dirty = new Set<KeyRecord>();

  record(key: KeyRecord, nowMs: number, promptTokens: number, completionTokens: number): void {
    key.lastUsedAt = iso(nowMs);
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
