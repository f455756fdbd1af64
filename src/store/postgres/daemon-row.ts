import { hostname } from 'node:os';
import type pg from 'pg';

/** What a daemon says of itself in ob_daemons (migration 6), every catch-up period. */
export interface DaemonRow {
  origin: string;
  /** The daemon's process id (0: not given). */
  pid: number;
  startedAt: string;
  /** The last change number it applied. */
  appliedChange: number;
  /** The xmax of the snapshot of its last read of ob_revocations (null: none yet). */
  appliedRevocations: string | null;
  /** When it was last in sync (ms since the epoch). */
  inSyncAt: number;
}

/**
 * Writes the daemon's row: the proof, every period, that the database takes this daemon's writes
 * (a database turned read-only refuses it, so the daemon goes stale), and what it has applied,
 * so that every live daemon and its lag can be listed. Its own row only: it waits on no lock
 * another daemon takes. Rows of daemons gone are deleted by the one doing the chores
 * (pruneDaemonRows).
 */
export async function writeDaemonRow(pool: pg.Pool, row: DaemonRow): Promise<void> {
  await pool.query(
    `INSERT INTO ob_daemons (origin, host, pid, started_at, seen_at, applied_change, applied_revocations, in_sync_at)
       VALUES ($1, $2, $3, $4, now(), $5, $6::xid8, to_timestamp($7::double precision / 1000))
     ON CONFLICT (origin) DO UPDATE SET seen_at = now(), applied_change = EXCLUDED.applied_change,
       applied_revocations = EXCLUDED.applied_revocations, in_sync_at = EXCLUDED.in_sync_at`,
    [row.origin, hostname(), row.pid, row.startedAt, row.appliedChange, row.appliedRevocations, row.inSyncAt],
  );
}

export async function pruneDaemonRows(pool: pg.Pool, keep: string): Promise<void> {
  await pool.query(`DELETE FROM ob_daemons WHERE seen_at < now() - interval '${keep}'`);
}
