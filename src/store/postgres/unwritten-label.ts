import type { UnsharedSummary } from './revocation-ledger.js';

/**
 * How a daemon tells the others about revocations only it holds (the database refused them: they
 * are in its memory and journal alone), through the one thing a database that refuses writes
 * still lets it publish: its session connection's `application_name`, which every session reads in
 * `pg_stat_activity` (a setting, not a write: a read-only database, or a standby, takes it). Its
 * row in ob_daemons cannot say it: the row is written with a probe of the revocation path, which
 * the same refusal fails.
 *
 * `ob-proxy <origin>`, then ` <count> <oldest, Unix seconds>` while it holds any: 63 bytes at
 * most (PostgreSQL cuts a longer name), with a UUID origin and up to 99,999 revocations.
 */

const PREFIX = 'ob-proxy';
const MAX_COUNT = 99_999;

export function unwrittenLabel(origin: string, held: UnsharedSummary): string {
  if (held.count === 0) return `${PREFIX} ${origin}`;
  const since = held.oldestAt === null ? 0 : Math.floor(Date.parse(held.oldestAt) / 1000);
  return `${PREFIX} ${origin} ${Math.min(held.count, MAX_COUNT)} ${since}`;
}

/**
 * The SQL that reads every label back, one row per daemon that holds revocations: `origin`,
 * `count`, `oldest_at` (ISO 8601 UTC, null when not known). Each daemon's newest session speaks
 * for it, a clean label included: a session the daemon dropped (lost, or timed out while the
 * database refused writes) may linger in pg_stat_activity with what it held then, and must not
 * outlive the session that replaced it.
 */
export const UNWRITTEN_LABELS = `SELECT origin, held::int AS count,
    CASE WHEN since = '0' THEN NULL ELSE
      to_char(to_timestamp(since::bigint) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END AS oldest_at
  FROM (SELECT DISTINCT ON (split_part(application_name, ' ', 2))
      split_part(application_name, ' ', 2) AS origin,
      split_part(application_name, ' ', 3) AS held,
      split_part(application_name, ' ', 4) AS since
    FROM pg_stat_activity
    WHERE datname = current_database() AND application_name ~ '^${PREFIX} [0-9a-f-]{36}( [0-9]{1,5} [0-9]{1,12})?$'
    ORDER BY split_part(application_name, ' ', 2), backend_start DESC) AS newest
  WHERE held <> ''`;
