import type pg from 'pg';
import type { KeyRecord } from '../../domain/key.js';
import { pruneDaemonRows } from './daemon-row.js';
import { CHORES_LOCK, LOCK_SPACE } from './migrations.js';
import type { RevocationLedger } from './revocation-ledger.js';
import { revokedKey } from './revocations.js';
import { rollUpBuckets } from './usage-buckets.js';

/**
 * The cluster's chores: pruning the tables that grow, and finding revocations whose daemon died
 * before writing their change. Invariant: one daemon at a time does them, the one whose session
 * connection holds the chores lock, a session advisory lock that PostgreSQL releases the moment
 * that connection ends (its daemon died), so another daemon takes it at its next period.
 */

// Keep the change log this long: a daemon away longer reloads the whole state instead.
const CHANGE_LOG_KEEP = '1 hour';
// Rows of daemons gone from the limit exchange are deleted after this long (limit-exchange.ts).
const LIMIT_ROWS_KEEP = '1 minute';
// Rows of daemons not seen for this long are deleted.
const DAEMON_ROWS_KEEP = '1 hour';
// A revocation in ob_revocations whose key is still active in ob_keys this long after: its
// daemon died before writing the change; the one doing the chores writes it.
const ORPHAN_AFTER = '1 minute';
const ORPHAN_PAGE = 500;
// The pruning runs this often: each run scans the change log (an hour of it), and rows kept a
// minute longer than their term change nothing.
const PRUNE_MS = 60_000;

/** Takes the chores lock on the session connection, if no other daemon's holds it. */
export async function tryChoresLock(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS locked', [
    LOCK_SPACE,
    CHORES_LOCK,
  ]);
  return rows[0]?.locked === true;
}

export class Chores {
  private prunedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly pool: pg.Pool,
    private readonly now: () => number,
    /** Where the orphans found go, for the write-back to write. */
    private readonly ledger: RevocationLedger,
  ) {}

  /**
   * Runs them if a minute has passed since the last run (the caller holds the chores lock).
   * `lastChange`: this daemon's change number; the change log is pruned only below it. On the
   * pool: the session connection answers only its own quick queries, within its time-out.
   */
  async runIfDue(lastChange: number): Promise<void> {
    if (this.now() - this.prunedAt < PRUNE_MS) return;
    this.prunedAt = this.now();
    await this.pool
      .query(`DELETE FROM ob_changes WHERE at < now() - interval '${CHANGE_LOG_KEEP}' AND no < $1`, [lastChange])
      .catch(() => {});
    await this.pool
      .query(`DELETE FROM ob_limit_counts WHERE at < now() - interval '${LIMIT_ROWS_KEEP}'`)
      .catch(() => {});
    await pruneDaemonRows(this.pool, DAEMON_ROWS_KEEP).catch(() => {});
    await this.findOrphans().catch(() => {});
    await rollUpBuckets(this.pool).catch(() => {});
  }

  /** Revocations whose daemon died before writing their change: the write-back writes them. */
  private async findOrphans(): Promise<void> {
    const { rows } = await this.pool.query<{ record: KeyRecord }>(
      `SELECT r.record FROM ob_revocations r JOIN ob_keys k ON k.id = r.key_id
        WHERE k.status = 'active' AND r.at < now() - interval '${ORPHAN_AFTER}' LIMIT ${ORPHAN_PAGE}`,
    );
    for (const r of rows) this.ledger.toWriteBack(revokedKey(r.record));
  }
}
