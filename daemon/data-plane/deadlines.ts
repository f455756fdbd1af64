/** What the watch ends: a relay past its deadline (upstream-relay.ts). */
export interface Expirable {
  /** `performance.now()` past which the exchange is over (the response deadline, or the drain's). */
  deadlineAt: number;
  /** Called once the deadline has passed; the relay then leaves the watch. */
  expire(): void;
}

/** How often deadlines are checked: a deadline fires at most this late (plus a busy loop's delay). */
export const DEADLINE_TICK_MS = 250;

/**
 * Every relay's deadline, checked by one timer, instead of a timer per request. A `setTimeout`
 * per request (the response deadline, then the drain's after [DONE]) cost two timers made and
 * cleared per stream, each a `Timeout` holding a closure over its relay in Node's timer list:
 * under callgrind, with the timers on, the daemon promoted several times more bytes per stream
 * to the old generation and ran more full collections (docs/performance.md, session 3). Here a
 * request costs a Set entry and a clock read; the deadlines are met within DEADLINE_TICK_MS,
 * well inside the second the limits promise.
 */
export class DeadlineWatch {
  private readonly live = new Set<Expirable>();
  private timer: NodeJS.Timeout | null = null;

  add(relay: Expirable): void {
    this.live.add(relay);
    if (this.timer === null) {
      // Stopped only by a tick that finds nothing to watch, so steady traffic never restarts it.
      this.timer = setInterval(this.tick, DEADLINE_TICK_MS);
      // The deadlines bound requests in flight; they are no reason to keep the process alive.
      this.timer.unref();
    }
  }

  delete(relay: Expirable): void {
    this.live.delete(relay);
  }

  /** How many relays are watched (for tests). */
  get size(): number {
    return this.live.size;
  }

  private readonly tick = (): void => {
    if (this.live.size === 0) {
      clearInterval(this.timer as NodeJS.Timeout);
      this.timer = null;
      return;
    }
    const now = performance.now();
    // A relay deletes itself as it expires; a Set tolerates that while it is iterated.
    for (const relay of this.live) {
      if (relay.deadlineAt <= now) {
        this.live.delete(relay);
        relay.expire();
      }
    }
  };
}

/** The daemon's one watch: timers are the process's, so is this. */
export const deadlines = new DeadlineWatch();
