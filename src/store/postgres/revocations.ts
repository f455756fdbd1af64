import type pg from 'pg';
import { type KeyRecord, emptyUsage } from '../../domain/key.js';

/**
 * Revocations apart from the change counter (table ob_revocations, migration 6). A revocation is
 * first committed here, in a transaction of its own that takes no lock another daemon's
 * bookkeeping holds (never the ob_meta counter row that every change takes), and only then
 * written as a change: a session holding the counter (a stuck transaction, a paused daemon) delays
 * the change, never the revocation. Every daemon reads the table beside the change log.
 */

/** The NOTIFY payload of a revocation row (a change's payload is its number). */
export const REVOCATION_PAYLOAD = 'revocation';

/**
 * Where a daemon's reading of ob_revocations stands: the snapshot of its last read, as its xmax
 * and the transactions it saw in progress. A row committed after that read has an xid at or past
 * the xmax, or among those in progress: the outbox pattern, so a row whose transaction was still
 * open at one read is seen at the next, and nothing is read twice in the common case.
 */
export interface RevocationCursor {
  xmax: string;
  xip: string[];
}

/** The key as every daemon must take it: revoked, its usage left to the change log. */
function rowRecord(key: KeyRecord): Omit<KeyRecord, 'usage' | 'lastUsedAt'> {
  const { usage: _usage, lastUsedAt: _last, ...rest } = key;
  return rest;
}

/**
 * Commits revoked keys to ob_revocations and wakes every daemon, in one statement (its own
 * transaction). A key already there is left as it is (the first revocation wins). Returns how
 * many were new.
 */
export async function insertRevocations(
  pool: pg.Pool,
  keys: readonly KeyRecord[],
  origin: string,
  channel: string,
): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    `WITH ins AS (
       INSERT INTO ob_revocations (key_id, record, origin)
         SELECT r->>'id', r, $2 FROM jsonb_array_elements($1::jsonb) AS r
         ON CONFLICT (key_id) DO NOTHING RETURNING 1),
     n AS (SELECT count(*) AS n FROM ins)
     SELECT n, CASE WHEN n > 0 THEN pg_notify($3, $4) END FROM n`,
    [JSON.stringify(keys.map(rowRecord)), origin, channel, REVOCATION_PAYLOAD],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * A revocation's insert (insertRevocations) that inserts nothing: it takes the locks a
 * revocation takes (the table's and its indexes', which CREATE INDEX, REINDEX, VACUUM FULL or a
 * LOCK TABLE hold against writes) and waits behind them as long as one would (the pool's
 * lock_timeout), and a database that refuses writes refuses it; it leaves no row for any daemon
 * to read and uses no transaction id. Part of each daemon's row write (daemon-row.ts), so a
 * daemon whose revocations would wait or fail is out of sync, as its row stays unwritten.
 */
export const REVOCATION_WRITE_PROBE = `INSERT INTO ob_revocations (key_id, record, origin)
  SELECT '', '{}'::jsonb, '' WHERE false ON CONFLICT (key_id) DO NOTHING`;

/**
 * A read's columns: its own snapshot (the next cursor) and the rows past the cursor, given as
 * the parameters numbered `at` and `at + 1` (cursorParams).
 */
export function revocationsSince(at: number, unseenOnly = false): string {
  // unseenOnly (a load): leaves out the rows whose key ob_keys already shows revoked.
  const unseen = unseenOnly
    ? ` AND NOT EXISTS (SELECT 1 FROM ob_keys k WHERE k.id = r.key_id AND k.status = 'revoked')`
    : '';
  return `
  pg_snapshot_xmax(pg_current_snapshot())::text AS rev_xmax,
  array(SELECT pg_snapshot_xip(pg_current_snapshot())::text) AS rev_xip,
  coalesce((SELECT json_agg(r.record) FROM ob_revocations r
    WHERE ($${at}::xid8 IS NULL OR r.xid >= $${at}::xid8 OR r.xid = ANY($${at + 1}::xid8[]))${unseen}), '[]'::json) AS revocations`;
}

/** The parameters of revocationsSince: null reads every row. */
export function cursorParams(c: RevocationCursor | null): [string | null, string[]] {
  return c === null ? [null, []] : [c.xmax, c.xip];
}

/** A row's record as a key the registry takes (no usage: that arrives by the change log). */
export function revokedKey(record: Omit<KeyRecord, 'usage' | 'lastUsedAt'>): KeyRecord {
  return { ...record, status: 'revoked', usage: emptyUsage(), lastUsedAt: null };
}
