import type { Logger } from 'pino';
import type { LifecycleService } from '../src/services/lifecycle.js';
import type { UsageTracker } from '../src/services/usage.js';
import type { Store } from '../src/store/store.js';
import type { Clock } from '../src/clock.js';
import { HOUR_MS, hourStart } from '../src/domain/usage-buckets.js';

export interface UsageFlusherDeps {
  usage: Pick<UsageTracker, 'takeDirty' | 'restore'>;
  /** The clock that names each flush's hour; absent (tests of the retries): the flush counts in no hour. */
  clock?: Clock;
  lifecycle: Pick<LifecycleService, 'flushUsage' | 'retryUnwritten'>;
  store: Pick<Store, 'subscribe'>;
  /** --usage-flush. */
  periodMs: number;
  log: Pick<Logger, 'warn'>;
}

/** What the shutdown's flush could not write: lost with the process, and said so. */
export interface UsageLost {
  err: unknown;
  /** How many keys' counters were not written. */
  keys: number;
}

/**
 * Usage is counted in memory by the request path and written here, as increments, once a period:
 * never per request. A flush that fails puts its counters back for the next one. One flush is
 * written at a time, and the shutdown's `final()` waits for it, so that counters a failed write
 * puts back are written (or reported lost) by the shutdown, never left in memory as the process ends.
 */
export class UsageFlusher {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  /** The periodic flush being written, if any. */
  private flushing: Promise<void> | null = null;

  constructor(private readonly deps: UsageFlusherDeps) {}

  start(): void {
    this.running = true;
    this.schedule();
  }

  /**
   * The next flush in a period, or at the next hour's start if that comes first: what one flush
   * takes is then counted in one hour (to within the timer's lateness, a few milliseconds).
   */
  private schedule(): void {
    const { lifecycle, store, periodMs, clock } = this.deps;
    if (!this.running) return;
    const now = clock?.now() ?? 0;
    const toHour = clock === undefined ? periodMs : HOUR_MS - (now % HOUR_MS);
    this.timer = setTimeout(
      () => {
        void this.flush();
        // A shared store: a revocation written late still reaches the other daemons soon after the
        // database is back, not only with this daemon's next management change.
        if (store.subscribe !== undefined) lifecycle.retryUnwritten().catch(() => {});
        this.schedule();
      },
      Math.min(periodMs, toHour),
    );
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** The hour what is taken now was counted in: the one that ends now, at an hour's start. */
  private hour(): string | undefined {
    const clock = this.deps.clock;
    return clock === undefined ? undefined : hourStart(clock.now() - 1);
  }

  /** Writes what was counted since the last flush; the one being written, if one is. */
  flush(): Promise<void> {
    if (this.flushing !== null) return this.flushing;
    const { usage, lifecycle, log } = this.deps;
    const dirty = usage.takeDirty(this.hour());
    const write = Promise.resolve()
      .then(() => lifecycle.flushUsage(dirty))
      .catch((err: unknown) => {
        usage.restore(dirty);
        log.warn({ err: (err as Error).message }, 'usage flush failed; will retry');
      })
      .finally(() => {
        if (this.flushing === write) this.flushing = null;
      });
    this.flushing = write;
    return write;
  }

  /**
   * The shutdown's flush, once every exchange is over: what was counted since the last flush,
   * and what a periodic flush still being written puts back if it fails. Null when all of it was
   * written; otherwise what was lost (nothing is retried: the store already failed once).
   */
  async final(): Promise<UsageLost | null> {
    const { usage, lifecycle } = this.deps;
    const dirty = usage.takeDirty(this.hour());
    let lost: unknown = null;
    const lose = (err: unknown): void => {
      lost = err;
    };
    await lifecycle.flushUsage(dirty).catch(lose);
    await this.flushing;
    const back = usage.takeDirty(this.hour());
    dirty.push(...back);
    if (lost === null) await lifecycle.flushUsage(back).catch(lose);
    return lost === null ? null : { err: lost, keys: dirty.length };
  }
}
