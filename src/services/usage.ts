import { iso } from '../clock.js';
import { type KeyRecord, emptyUsage } from '../domain/key.js';
import { routeCounters } from '../domain/route-usage.js';
import type { UsageDelta } from '../store/store.js';
import type { ExchangeCounts, KeyCounters } from './registry.js';

export type { ExchangeCounts, RequestOutcome } from './registry.js';

/**
 * Per-key usage gathered in memory on the request path and written in batches: a request
 * never waits for, or causes, a write of its own. The registry's key shows the running total
 * (counted through the registry's KeyCounters, the one place that changes it); what is written
 * is what this daemon added since its last flush, so that several daemons sharing a store add
 * to the stored counters instead of writing over each other's.
 */
export class UsageTracker {
  private dirty = new Map<KeyRecord, UsageDelta>();
  // Formatting a date cost more than the rest of the bookkeeping: the text up to the second is
  // made once per second, and each request adds its milliseconds.
  private lastSecond = Number.NaN;
  private secondText = '';

  constructor(private readonly counters: KeyCounters) {}

  /** A request sent to the model server, through `route` (the client API: `chat`, `responses`, ...). */
  record(key: KeyRecord, nowMs: number, route: string, promptTokens: number, completionTokens: number): void {
    const second = Math.floor(nowMs / 1000);
    if (second !== this.lastSecond) {
      this.lastSecond = second;
      this.secondText = iso(second * 1000).slice(0, -4);
    }
    const ms = nowMs - second * 1000;
    const at = `${this.secondText}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`;
    this.counters.countRequest(key, at, route, promptTokens, completionTokens);
    const d = this.delta(key);
    d.requests += 1;
    d.promptTokens += promptTokens;
    d.completionTokens += completionTokens;
    const r = routeCounters(d.byRoute, route);
    r.requests += 1;
    r.promptTokens += promptTokens;
    r.completionTokens += completionTokens;
    d.firstUsedAt ??= at;
    d.lastUsedAt = at;
  }

  /** The exchange is over: its tokens, and whether it failed or the client left. */
  finished(key: KeyRecord, c: ExchangeCounts): void {
    this.counters.countExchange(key, c);
    const d = this.delta(key);
    d.promptTokens += c.prompt;
    d.completionTokens += c.completion;
    const r = routeCounters(d.byRoute, c.route);
    r.promptTokens += c.prompt;
    r.completionTokens += c.completion;
    d.reasoningTokens += c.reasoning;
    d.estimatedTokens += c.estimated;
    if (c.outcome === 'error') d.errors += 1;
    else if (c.outcome === 'disconnect') d.disconnects += 1;
  }

  private delta(key: KeyRecord): UsageDelta {
    let d = this.dirty.get(key);
    if (d === undefined) {
      d = { keyId: key.id, ...emptyUsage(), lastUsedAt: key.lastUsedAt };
      this.dirty.set(key, d);
    }
    return d;
  }

  /**
   * What was added since the last take, per key, each in `hour` (the hour it was counted in: the
   * flusher takes at every hour's start, so that no take holds two hours). A delta put back
   * after a failed write keeps the hour it had.
   */
  takeDirty(hour?: string): UsageDelta[] {
    const out = [...this.dirty.values()];
    this.dirty = new Map();
    if (hour !== undefined) for (const d of out) d.hour ??= hour;
    return out;
  }

  /** What was added since the last take, not taken: a report's count of what is not written yet. */
  peek(): readonly UsageDelta[] {
    return [...this.dirty.values()];
  }

  /**
   * Puts deltas back after a failed flush, so the next flush writes them too. Each goes back
   * under a stand-in record of its own: two deltas for one key are simply two additions.
   */
  restore(deltas: UsageDelta[]): void {
    for (const d of deltas) this.dirty.set({ id: d.keyId } as KeyRecord, { ...d });
  }
}
