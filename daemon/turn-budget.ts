/**
 * How much of a long piece of work (a whole list, a report, a scrape) runs between two turns of
 * the event loop: at most `steps` steps, and at most SLICE_MS of time, whichever comes first. The
 * count alone bounds a turn only where each step's cost is known; code run for the first time
 * (not yet compiled), or a machine slower than the one the count was set on, took 27 ms for a
 * count meant to take two. The clock is read every CLOCK_EVERY steps, so it costs nothing.
 */

/** The longest a piece of work holds the event loop, give or take CLOCK_EVERY steps. */
export const SLICE_MS = 5;
const CLOCK_EVERY = 32;

export class TurnBudget {
  private done = 0;
  private since: number;

  constructor(
    private readonly steps: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.since = now();
  }

  /** `n` more steps taken: true when the work should wait a turn now (pause). */
  spent(n = 1): boolean {
    const before = this.done;
    this.done += n;
    const clock = Math.floor(this.done / CLOCK_EVERY) !== Math.floor(before / CLOCK_EVERY);
    return this.done >= this.steps || (clock && this.now() - this.since >= SLICE_MS);
  }

  /** Waits a turn of the event loop; the budget starts anew after it. */
  async pause(): Promise<void> {
    await nextTurn();
    this.restart();
  }

  /** The work waited turns of its own: the budget starts anew. */
  restart(): void {
    this.done = 0;
    this.since = this.now();
  }
}

/** A turn of the event loop: what a long piece of work waits for between its pieces, so requests meanwhile are served. */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
