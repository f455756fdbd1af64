import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import type { Store } from '../src/store/store.js';

/** How often the store's last sync is compared with --max-stale. */
const CHECK_MS = 100;

export interface StaleStoreWatchDeps {
  store: Pick<Store, 'lastInSync' | 'location'>;
  clock: Clock;
  /** --max-stale. */
  maxStaleMs: number;
  /** Where the request path reads the verdict (the daemon's context). */
  flag: { storeStale: boolean };
  log: Pick<Logger, 'info' | 'error'>;
}

/**
 * Bounded staleness (docs/contract.md §4): out of sync with a shared store for longer than
 * --max-stale, every key is refused until in sync again. The verdict is a flag the request path
 * reads, set here, so a request never computes it, and a change of state is logged once. A store
 * this daemon alone writes is never stale: nothing is armed for it.
 */
export class StaleStoreWatch {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: StaleStoreWatchDeps) {}

  start(): void {
    if (this.deps.store.lastInSync === undefined) return;
    this.timer = setInterval(() => this.check(), CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Compares the store's last sync with --max-stale, and sets the flag. */
  check(): void {
    const { store, clock, maxStaleMs, flag, log } = this.deps;
    if (store.lastInSync === undefined) return;
    const behindMs = clock.now() - store.lastInSync();
    const stale = behindMs > maxStaleMs;
    if (stale === flag.storeStale) return;
    flag.storeStale = stale;
    if (stale)
      log.error(
        { store: store.location, behindMs, maxStaleMs },
        'out of sync with the store for longer than --max-stale: refusing every key with 503 store_unreachable until in sync again',
      );
    else log.info({ store: store.location }, 'in sync with the store again: serving keys');
  }
}
