import { iso } from '../clock.js';
import type { KeyRecord } from '../domain/key.js';
import type { UsageDelta } from '../store/store.js';

/**
 * Per-key usage gathered in memory on the request path and written in batches: a request
 * never waits for, or causes, a write of its own. The registry's key shows the running total;
 * what is written is what this daemon added since its last flush, so that several daemons
 * sharing a store add to the stored counters instead of writing over each other's.
 */
export class UsageTracker {
  private dirty = new Map<KeyRecord, UsageDelta>();
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
    const d = this.delta(key);
    d.requests += 1;
    d.promptTokens += promptTokens;
    d.completionTokens += completionTokens;
    d.lastUsedAt = key.lastUsedAt;
  }

  addTokens(key: KeyRecord, promptTokens: number, completionTokens: number): void {
    key.usage.promptTokens += promptTokens;
    key.usage.completionTokens += completionTokens;
    const d = this.delta(key);
    d.promptTokens += promptTokens;
    d.completionTokens += completionTokens;
  }

  private delta(key: KeyRecord): UsageDelta {
    let d = this.dirty.get(key);
    if (d === undefined) {
      d = { keyId: key.id, requests: 0, promptTokens: 0, completionTokens: 0, lastUsedAt: key.lastUsedAt };
      this.dirty.set(key, d);
    }
    return d;
  }

  /** What was added since the last take, per key. */
  takeDirty(): UsageDelta[] {
    const out = [...this.dirty.values()];
    this.dirty = new Map();
    return out;
  }

  /**
   * Puts deltas back after a failed flush, so the next flush writes them too. Each goes back
   * under a stand-in record of its own: two deltas for one key are simply two additions.
   */
  restore(deltas: UsageDelta[]): void {
    for (const d of deltas) this.dirty.set({ id: d.keyId } as KeyRecord, { ...d });
  }

}
