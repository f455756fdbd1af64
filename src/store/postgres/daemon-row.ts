import { hostname } from 'node:os';
import type pg from 'pg';
import type { DaemonReport, DaemonReports } from '../../services/revocation-confirmation.js';
import { REVOCATION_WRITE_PROBE } from './revocations.js';

/** What a daemon says of itself in ob_daemons (migrations 6 and 7), every catch-up period. */
export interface DaemonRow {
  origin: string;
  /** The daemon's process id (0: not given). */
  pid: number;
  startedAt: string;
  /** The last change number it applied. */
  appliedChange: number;
  /** The xmax of the snapshot of its last read of ob_revocations (null: none yet). */
  appliedRevocations: string | null;
  /** The transactions in progress at that read: with the xmax, exactly the rows it has applied. */
  appliedXip: readonly string[];
  /** When it was last in sync (ms since the epoch). */
  inSyncAt: number;
  /** Its --max-stale (ms): silent longer than this, it refuses every key. */
  maxStaleMs: number;
}

/**
 * Writes the daemon's row: the proof, every period, that the database takes this daemon's
 * revocations (the probe waits behind whatever a revocation would wait behind; a database
 * turned read-only refuses it, so the daemon goes stale), and what it has applied, so that every
 * live daemon and its lag can be listed. Its own row only: it waits on no lock another daemon
 * takes. Rows of daemons gone are deleted by the one doing the chores (pruneDaemonRows).
 */
export async function writeDaemonRow(pool: pg.Pool, row: DaemonRow): Promise<void> {
  await pool.query(
    `WITH revocation_probe AS (${REVOCATION_WRITE_PROBE})
     INSERT INTO ob_daemons (origin, host, pid, started_at, seen_at, applied_change, applied_revocations, in_sync_at, applied_xip, max_stale_ms)
       VALUES ($1, $2, $3, $4, now(), $5, $6::xid8, to_timestamp($7::double precision / 1000), $8::xid8[], $9)
     ON CONFLICT (origin) DO UPDATE SET seen_at = now(), applied_change = EXCLUDED.applied_change,
       applied_revocations = EXCLUDED.applied_revocations, in_sync_at = EXCLUDED.in_sync_at,
       applied_xip = EXCLUDED.applied_xip, max_stale_ms = EXCLUDED.max_stale_ms`,
    [
      row.origin,
      hostname(),
      row.pid,
      row.startedAt,
      row.appliedChange,
      row.appliedRevocations,
      row.inSyncAt,
      row.appliedXip,
      row.maxStaleMs,
    ],
  );
}

export async function pruneDaemonRows(pool: pg.Pool, keep: string): Promise<void> {
  await pool.query(`DELETE FROM ob_daemons WHERE seen_at < now() - interval '${keep}'`);
}

/**
 * Whether the revocation row `r` is applied by daemon `d`: its xid is below the xmax of the
 * daemon's last read and was not in progress then (the snapshot saw it committed). The lower
 * bound lets the index on xid find the rows not applied.
 */
const NOT_APPLIED = `r.xid >= least(d.applied_revocations, (SELECT min(x) FROM unnest(d.applied_xip) x))
    AND (r.xid >= d.applied_revocations OR r.xid = ANY(d.applied_xip))`;

/**
 * Every daemon's last report, in one statement (one snapshot): what it has applied, how far
 * behind the store that is, and how many of `keyIds`' revocations it had not applied. A key of
 * `keyIds` with no row in ob_revocations is not shared (the database has not taken its
 * revocation), unless ob_keys holds it revoked: revoked before revocations had their table, so
 * loaded revoked by every daemon running this version.
 */
export async function readDaemonReports(
  pool: pg.Pool,
  keyIds: readonly string[],
  self: string,
): Promise<DaemonReports> {
  const { rows } = await pool.query<{
    daemons: {
      origin: string;
      host: string;
      pid: number;
      started_at: string;
      seen_at: string;
      report_age_ms: number;
      applied_change: number;
      change_lag: number;
      applied_revocations: string | null;
      reports_points: boolean;
      behind: number | null;
      pending: number | null;
      in_sync_at: string | null;
      max_stale_ms: number | null;
    }[];
    newest: string | null;
    not_shared: string[];
  }>(
    `WITH target AS (
       SELECT t.key_id, r.xid FROM unnest($1::text[]) AS t(key_id)
         LEFT JOIN ob_revocations r USING (key_id)),
     head AS (SELECT change_no FROM ob_meta WHERE id = 1)
     SELECT coalesce((SELECT json_agg(x ORDER BY x.started_at, x.origin) FROM (
       SELECT d.origin, d.host, d.pid, to_char(d.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS started_at,
         to_char(d.seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS seen_at,
         greatest(0, round(extract(epoch FROM clock_timestamp() - d.seen_at) * 1000))::bigint AS report_age_ms,
         d.applied_change, greatest(0, (SELECT change_no FROM head) - d.applied_change) AS change_lag,
         d.applied_revocations::text AS applied_revocations,
         d.applied_revocations IS NOT NULL AND d.applied_xip IS NOT NULL AS reports_points,
         CASE WHEN d.applied_revocations IS NULL OR d.applied_xip IS NULL THEN NULL ELSE
           (SELECT count(*) FROM ob_revocations r WHERE ${NOT_APPLIED}) END AS behind,
         CASE WHEN d.applied_revocations IS NULL OR d.applied_xip IS NULL THEN NULL ELSE
           (SELECT count(*) FROM target r WHERE r.xid IS NOT NULL AND ${NOT_APPLIED}) END AS pending,
         to_char(d.in_sync_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS in_sync_at,
         d.max_stale_ms
       FROM ob_daemons d) x), '[]'::json) AS daemons,
       (SELECT max(xid)::text FROM ob_revocations) AS newest,
       array(SELECT t.key_id FROM target t WHERE t.xid IS NULL
         AND NOT EXISTS (SELECT 1 FROM ob_keys k WHERE k.id = t.key_id AND k.status = 'revoked')
         ORDER BY t.key_id) AS not_shared`,
    [keyIds],
  );
  const row = rows[0]!;
  const daemons: DaemonReport[] = row.daemons.map((d) => ({
    id: d.origin,
    self: d.origin === self,
    host: d.host,
    pid: d.pid,
    startedAt: d.started_at,
    reportedAt: d.seen_at,
    reportAgeMs: Number(d.report_age_ms),
    appliedChange: Number(d.applied_change),
    changeLag: Number(d.change_lag),
    appliedRevocations: d.applied_revocations,
    revocationsBehind: d.behind === null ? null : Number(d.behind),
    pending: d.reports_points ? Number(d.pending) : null,
    lastInSyncAt: d.in_sync_at,
    maxStaleMs: d.max_stale_ms,
  }));
  return { daemons, newestRevocation: row.newest, notShared: row.not_shared };
}
