import type { Gauge } from 'prom-client';

/** Rows a turn of the event loop: a few milliseconds of prom-client's labelled sets. */
export const ROWS_A_TURN = 1_000;

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * A gauge's `collect` that fills it from `rows` (labels and value, made as they are read) over
 * several turns of the event loop. A gauge labelled by instance has a series per instance: at
 * 50,000 instances filled in one turn, a scrape held every request for seconds. Collections are
 * taken one at a time, so a scrape that starts during another's never sees the gauge half filled:
 * each reads the values as soon as its own collection ends, before the next one resets them.
 */
export function collectInTurns<L extends string>(
  rows: () => Iterable<[Partial<Record<L, string>>, number]>,
): (this: Gauge<L>) => Promise<void> {
  let last: Promise<void> = Promise.resolve();
  return function collect(this: Gauge<L>): Promise<void> {
    const run = last.then(() => fill(this, rows()));
    last = run.catch(() => {});
    return run;
  };
}

async function fill<L extends string>(
  gauge: Gauge<L>,
  rows: Iterable<[Partial<Record<L, string>>, number]>,
): Promise<void> {
  // Read first, set after: the sets of one scrape are never interleaved with another's reset.
  const all: [Partial<Record<L, string>>, number][] = [];
  for (const row of rows) {
    all.push(row);
    if (all.length % ROWS_A_TURN === 0) await nextTurn();
  }
  gauge.reset();
  for (let i = 0; i < all.length; i++) {
    gauge.set(all[i]![0], all[i]![1]);
    if ((i + 1) % ROWS_A_TURN === 0) await nextTurn();
  }
}
