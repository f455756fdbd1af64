import type pg from 'pg';
import type { LimitCounts, LimitExchange } from '../store.js';
import { errText } from './notices.js';

/**
 * The cluster's exchange of per-key limit counts (table ob_limit_counts). Invariants: a tick is
 * the same instant on every daemon (a multiple of the period), at most one round trip is under
 * way (a tick that finds one is skipped, its demand counted in the next), and nothing is written
 * while no key has a limit.
 */

// A daemon's own limit rows are kept this many ticks, and a daemon that stopped writing is
// counted with its last row as long (the chores delete the rows of daemons gone: chores.ts).
const LIMIT_ROWS_KEEP_TICKS = 8;

export interface LimitExchangeDeps {
  pool: pg.Pool;
  /** This daemon's name in the rows. */
  origin: string;
  /** The store, as it may be shown. */
  location: string;
  now: () => number;
  /** Said once when the exchange fails, and once when it works again. */
  onNotice?: (message: string) => void;
}

export class LimitExchanger {
  private exchange: LimitExchange | null = null;
  private timer: NodeJS.Timeout | undefined;
  private lastTick = 0;
  private exchanging: Promise<void> | null = null;
  private failing = false;
  private closed = false;

  constructor(private readonly deps: LimitExchangeDeps) {}

  start(exchange: LimitExchange): void {
    this.exchange = exchange;
    this.schedule();
  }

  /** No tick after this one; `idle()` waits for a round trip under way. */
  stop(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  async idle(): Promise<void> {
    await this.exchanging;
  }

  /** The next tick: the next multiple of the period, the same instant on every daemon. */
  private schedule(): void {
    if (this.closed || this.exchange === null) return;
    const p = this.exchange.periodMs;
    this.timer = setTimeout(() => this.tick(), p - (this.deps.now() % p) + 1);
    this.timer.unref();
  }

  private tick(): void {
    const ex = this.exchange!;
    const now = this.deps.now();
    const tick = Math.floor(now / ex.periodMs);
    this.schedule();
    // A round trip still under way (a slow database): this tick is skipped, its demand counted in the next.
    if (tick <= this.lastTick || this.exchanging !== null) return;
    // No key has a limit: a row of nothing would be written and read back four times a second.
    if (ex.needed?.() === false) return;
    this.lastTick = tick;
    this.exchanging = this.roundTrip(ex, tick, ex.capture(now)).finally(() => {
      this.exchanging = null;
    });
  }

  /**
   * One statement a tick: this daemon's counts written for this tick, its rows of long ago
   * deleted, and every daemon's counts of the tick before read back. That tick's rows were all
   * written a period ago, so every daemon reads the same ones (not a race between the writes).
   * A daemon whose last write is older (slow, or cut off from the database) counts with its
   * latest row for a few more ticks, so the others do not share out what it may still be using.
   */
  private async roundTrip(ex: LimitExchange, tick: number, counts: LimitCounts): Promise<void> {
    const { pool, origin, location, onNotice } = this.deps;
    try {
      // The commit does not wait for the WAL to reach the disk (synchronous_commit off for this
      // statement's transaction alone, set in it so that it costs no round trip): a row is worth
      // one tick, and one lost in a server crash is a tick whose write failed. Read by the insert,
      // so that it is set whatever else the statement finds.
      const { rows } = await pool.query<{ node: string; counts: LimitCounts }>(
        `WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
              put AS (INSERT INTO ob_limit_counts (tick, node, counts) SELECT $1, $2, $3 FROM async
                        ON CONFLICT (tick, node) DO UPDATE SET counts = EXCLUDED.counts, at = now()),
              old AS (DELETE FROM ob_limit_counts WHERE node = $2 AND tick < $4)
         SELECT DISTINCT ON (node) node, counts FROM ob_limit_counts WHERE tick BETWEEN $4 AND $5 ORDER BY node, tick DESC`,
        [tick, origin, JSON.stringify(counts), tick - LIMIT_ROWS_KEEP_TICKS, tick - 1],
      );
      const nodes = new Map<string, LimitCounts>();
      for (const r of rows) if (isLimitCounts(r.counts)) nodes.set(r.node, r.counts);
      ex.received({ tick: tick - 1, self: origin, nodes });
      if (this.failing) onNotice?.(`Exchanging per-key limit counts through ${location} again.`);
      this.failing = false;
    } catch (err) {
      // Said once, apart from the change log's notices: this runs every period.
      if (!this.failing)
        onNotice?.(
          `Cannot exchange per-key limit counts through ${location} (${errText(err)}): this daemon keeps to its last share of each key's limits.`,
        );
      this.failing = true;
    }
  }
}

/** A row as this version writes it (another version's, or a damaged one, is left out of the split). */
function isLimitCounts(x: unknown): x is LimitCounts {
  const c = x as LimitCounts | null;
  return (
    typeof c === 'object' && c !== null && typeof c.window === 'number' && typeof c.keys === 'object' && c.keys !== null
  );
}
