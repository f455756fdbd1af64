import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import type { LifecycleService } from '../src/services/lifecycle.js';
import type { Store } from '../src/store/store.js';

/** setTimeout holds at most 2^31-1 ms (24.8 days), and fires at once for more. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How often a daemon of a shared store that does not hold its chores looks at a due pack again. */
const TAKEOVER_LOOK_MS = 1000;

/** Fires this long after a pack's end, so the end is past when the lifecycle compares. */
const AFTER_END_MS = 5;

export interface PackTimerDeps {
  lifecycle: Pick<LifecycleService, 'nextPackEnd' | 'endDuePacks'>;
  store: Pick<Store, 'holdsChores'>;
  clock: Clock;
  log: Pick<Logger, 'info' | 'error'>;
}

/**
 * Packs are ended by the daemon's own clock: one timer, armed for the earliest pack end, ends
 * every pack due (instance stopped, keys revoked) and re-arms. The request path also checks pack
 * ends itself, between ticks, so nothing is armed before `start()` nor after `stop()`.
 */
export class PackTimer {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(private readonly deps: PackTimerDeps) {}

  start(): void {
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** Re-arms from the lifecycle's next pack end: called whenever an instance changes. */
  schedule(): void {
    const { lifecycle, store, clock, log } = this.deps;
    clearTimeout(this.timer);
    const next = lifecycle.nextPackEnd();
    if (next === null || !this.running) return;
    // A pack that ends beyond the cap is simply re-armed when the capped timer fires. A daemon of
    // a shared store that does not hold its chores looks again every second, to take over from
    // one that died.
    const wait = Math.max(0, next - clock.now());
    const delay = Math.min(
      wait === 0 && store.holdsChores?.() === false ? TAKEOVER_LOOK_MS : wait + AFTER_END_MS,
      MAX_TIMER_MS,
    );
    this.timer = setTimeout(() => {
      lifecycle
        .endDuePacks()
        .then(
          (ended) => {
            for (const i of ended) log.info({ instance: i.id }, 'pack ended: instance stopped, keys revoked');
          },
          (err: unknown) => log.error({ err }, 'ending packs failed'),
        )
        .finally(() => this.schedule());
    }, delay);
  }
}

/**
 * At start, before anything is served: the packs that ran out while the daemon was down. A store
 * that cannot be written now does not keep the daemon down: the packs are ended in memory (and in
 * the revocation journal) all the same, and the write is retried.
 */
export async function endPacksEndedWhileDown(
  lifecycle: Pick<LifecycleService, 'endDuePacks'>,
  log: Pick<Logger, 'info' | 'error'>,
): Promise<void> {
  await lifecycle.endDuePacks().then(
    (ended) => {
      for (const i of ended) log.info({ instance: i.id }, 'pack ended while the daemon was down: keys revoked');
    },
    (err: unknown) =>
      log.error(
        { err: (err as Error).message },
        'ending packs that ran out while the daemon was down: not written yet',
      ),
  );
}
