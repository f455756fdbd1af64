import { hostname } from 'node:os';
import type pg from 'pg';
import type { DaemonReport, DaemonReports, UnwrittenHold } from '../../services/revocation-confirmation.js';
import type { UnsharedSummary } from './revocation-ledger.js';
import { REVOCATION_WRITE_PROBE, type RevocationCursor } from './revocations.js';
import { UNWRITTEN_LABELS } from './unwritten-label.js';

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

/** What the daemon asking has applied, from its memory: its row may be older (a write waits). */
export interface OwnPosition {
  origin: string;
  change: number;
  cursor: RevocationCursor | null;
  /** The revocations it holds that the database has not taken. */
  unwritten: UnsharedSummary;
}

/**
 * Every daemon's last report, in one statement (one snapshot): what it has applied, how far
 * behind the store that is, and how many of `keyIds`' revocations it had not applied. A key's
 * revocation is its row of ob_revocations, or the change that revoked it in ob_keys (one whose
 * row the database refused reaches the others only that way); a daemon has applied it once its
 * report is past either. A change pruned from the log is known only to be older than every
 * change kept, and older than the change every daemon had applied when the log was searched, so
 * a daemon past both has applied it. A key in neither (revoked in a daemon's journal alone, or
 * not revoked) is not shared: no daemon confirms it. The asking daemon's own report is what it
 * has applied now.
 */
export async function readDaemonReports(
  pool: pg.Pool,
  keyIds: readonly string[],
  own: OwnPosition,
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
    unwritten: { origin: string; count: number; oldest_at: string | null }[];
  }>(
    `WITH ds AS (
       SELECT d.origin, d.host, d.pid, d.started_at, d.seen_at, d.in_sync_at, d.max_stale_ms,
         CASE WHEN d.origin = $2 THEN $3::bigint ELSE d.applied_change END AS applied_change,
         CASE WHEN d.origin = $2 AND $4::xid8 IS NOT NULL THEN $4::xid8 ELSE d.applied_revocations END AS applied_revocations,
         CASE WHEN d.origin = $2 AND $4::xid8 IS NOT NULL THEN $5::xid8[] ELSE d.applied_xip END AS applied_xip
       FROM ob_daemons d),
     head AS (SELECT change_no FROM ob_meta WHERE id = 1),
     searched AS (SELECT coalesce(min(applied_change), 0) AS above FROM ds),
     revoking AS (
       SELECT m->'key'->>'id' AS key_id, min(c.no) AS no
       FROM ob_changes c CROSS JOIN LATERAL jsonb_array_elements(c.mutations || c.extra) m
       WHERE cardinality($1::text[]) > 0 AND c.no > (SELECT above FROM searched)
         AND m->>'op' = 'putKey' AND m->'key'->>'status' = 'revoked' AND m->'key'->>'id' = ANY($1::text[])
       GROUP BY 1),
     target AS (
       SELECT t.key_id, r.xid,
         CASE WHEN k.status = 'revoked' THEN coalesce(v.no, greatest((SELECT above FROM searched),
           coalesce((SELECT min(no) FROM ob_changes), (SELECT change_no FROM head) + 1) - 1)) END AS change_no
       FROM unnest($1::text[]) AS t(key_id)
         LEFT JOIN ob_revocations r USING (key_id)
         LEFT JOIN ob_keys k ON k.id = t.key_id
         LEFT JOIN revoking v ON v.key_id = t.key_id)
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
           (SELECT count(*) FROM target r WHERE (r.xid IS NOT NULL OR r.change_no IS NOT NULL)
              AND (r.xid IS NULL OR (${NOT_APPLIED}))
              AND (r.change_no IS NULL OR d.applied_change < r.change_no)) END AS pending,
         to_char(d.in_sync_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS in_sync_at,
         d.max_stale_ms
       FROM ds d) x), '[]'::json) AS daemons,
       (SELECT max(xid)::text FROM ob_revocations) AS newest,
       array(SELECT t.key_id FROM target t WHERE t.xid IS NULL AND t.change_no IS NULL ORDER BY t.key_id) AS not_shared,
       coalesce((SELECT json_agg(u ORDER BY u.origin) FROM (${UNWRITTEN_LABELS}) u WHERE u.origin <> $2), '[]'::json) AS unwritten`,
    [keyIds, own.origin, own.change, own.cursor?.xmax ?? null, own.cursor?.xip ?? []],
  );
  const row = rows[0]!;
  const daemons: DaemonReport[] = row.daemons.map((d) => ({
    id: d.origin,
    self: d.origin === own.origin,
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
  // This daemon's own from memory: its label is set a period later, and fails with its connection.
  const held: UnwrittenHold[] = row.unwritten.map((u) => ({
    id: u.origin,
    self: false,
    revocations: u.count,
    oldestAt: u.oldest_at,
  }));
  if (own.unwritten.count > 0)
    held.unshift({ id: own.origin, self: true, revocations: own.unwritten.count, oldestAt: own.unwritten.oldestAt });
  return { daemons, newestRevocation: row.newest, notShared: row.not_shared, unwritten: held };
}
