import type pg from 'pg';
import type { PoolClient } from 'pg';
import { type UsageBucket, countsAnything } from '../../domain/usage-buckets.js';
import type { BucketQuery, UsageDelta } from '../store.js';
import { pieces } from './import-pieces.js';

const ADD = `ON CONFLICT (key_id, size, start) DO UPDATE SET
  requests = ob_usage_buckets.requests + EXCLUDED.requests,
  prompt_tokens = ob_usage_buckets.prompt_tokens + EXCLUDED.prompt_tokens,
  completion_tokens = ob_usage_buckets.completion_tokens + EXCLUDED.completion_tokens,
  errors = ob_usage_buckets.errors + EXCLUDED.errors`;

const ISO = `to_char(start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * Adds a flush's deltas to their hours, inside the caller's transaction: summed per key and hour
 * first (an INSERT … ON CONFLICT may not touch one row twice), added to what other daemons wrote.
 */
export async function addBucketRows(client: PoolClient, usage: readonly UsageDelta[]): Promise<void> {
  const rows = usage.filter((u) => u.hour !== undefined && countsAnything(u));
  if (rows.length === 0) return;
  await client.query(
    `INSERT INTO ob_usage_buckets (key_id, size, start, requests, prompt_tokens, completion_tokens, errors)
     SELECT d->>'keyId', 'hour', (d->>'hour')::timestamptz, sum((d->>'requests')::bigint),
       sum((d->>'promptTokens')::bigint), sum((d->>'completionTokens')::bigint), sum((d->>'errors')::bigint)
     FROM jsonb_array_elements($1::jsonb) AS d
     WHERE EXISTS (SELECT 1 FROM ob_keys WHERE id = d->>'keyId')
     GROUP BY d->>'keyId', d->>'hour'
     ${ADD}`,
    [
      JSON.stringify(
        rows.map((u) => ({
          keyId: u.keyId,
          hour: u.hour,
          requests: u.requests,
          promptTokens: u.promptTokens,
          completionTokens: u.completionTokens,
          errors: u.errors,
        })),
      ),
    ],
  );
}

/** A whole store's buckets (`store migrate`), into an emptied table. */
export async function importBuckets(client: PoolClient, buckets: readonly UsageBucket[]): Promise<void> {
  await client.query('TRUNCATE ob_usage_buckets');
  for (const part of pieces(buckets))
    await client.query(
      `INSERT INTO ob_usage_buckets (key_id, size, start, requests, prompt_tokens, completion_tokens, errors)
     SELECT b->>'keyId', b->>'size', (b->>'start')::timestamptz, (b->>'requests')::bigint,
       (b->>'promptTokens')::bigint, (b->>'completionTokens')::bigint, (b->>'errors')::bigint
     FROM jsonb_array_elements($1::jsonb) AS b`,
      [part],
    );
}

/** The buckets that overlap [since, until), of some keys or all. */
export async function readBuckets(pool: pg.Pool, q: BucketQuery): Promise<UsageBucket[]> {
  const { rows } = await pool.query<{
    key_id: string;
    size: 'hour' | 'day';
    start: string;
    requests: string;
    prompt_tokens: string;
    completion_tokens: string;
    errors: string;
  }>(
    `SELECT key_id, size, ${ISO} AS start, requests, prompt_tokens, completion_tokens, errors
     FROM ob_usage_buckets
     WHERE ($1::timestamptz IS NULL OR start + CASE size WHEN 'day' THEN interval '1 day' ELSE interval '1 hour' END > $1::timestamptz)
       AND ($2::timestamptz IS NULL OR start < $2::timestamptz)
       AND ($3::text[] IS NULL OR key_id = ANY($3::text[]))
     ORDER BY start, key_id`,
    [q.since, q.until, q.keyIds === null ? null : [...q.keyIds]],
  );
  return rows.map((r) => ({
    keyId: r.key_id,
    size: r.size,
    start: r.start,
    requests: Number(r.requests),
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
    errors: Number(r.errors),
  }));
}

/** The chores' roll-up: hours older than a week added into their day (UTC), then deleted. */
export async function rollUpBuckets(pool: pg.Pool): Promise<void> {
  await pool.query(
    `WITH old AS (
       DELETE FROM ob_usage_buckets WHERE size = 'hour' AND start < now() - interval '7 days' RETURNING *
     )
     INSERT INTO ob_usage_buckets (key_id, size, start, requests, prompt_tokens, completion_tokens, errors)
     SELECT key_id, 'day', date_trunc('day', start AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', sum(requests),
       sum(prompt_tokens), sum(completion_tokens), sum(errors)
     FROM old GROUP BY key_id, date_trunc('day', start AT TIME ZONE 'UTC')
     ${ADD}`,
  );
}
