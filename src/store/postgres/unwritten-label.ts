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
 * The SQL that reads every label back, one row per session of this database that holds
 * revocations: `origin`, `count`, `oldest_at` (ISO 8601 UTC, null when not known).
 */
export const UNWRITTEN_LABELS = `SELECT DISTINCT ON (split_part(application_name, ' ', 2))
    split_part(application_name, ' ', 2) AS origin,
    split_part(application_name, ' ', 3)::int AS count,
    CASE WHEN split_part(application_name, ' ', 4) = '0' THEN NULL ELSE
      to_char(to_timestamp(split_part(application_name, ' ', 4)::bigint) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END AS oldest_at
  FROM pg_stat_activity
  WHERE datname = current_database() AND application_name ~ '^${PREFIX} [0-9a-f-]{36} [0-9]{1,5} [0-9]{1,12}$'
  ORDER BY split_part(application_name, ' ', 2), backend_start DESC`;
