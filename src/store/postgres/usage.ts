import type { PoolClient } from 'pg';
import { IMPORT_PIECE } from './import-pieces.js';
import type { KeyRecord } from '../../domain/key.js';
import { type UsageByRoute, addByRoute } from '../../domain/route-usage.js';
import type { UsageDelta } from '../store.js';

/**
 * A key's usage on PostgreSQL: its totals are columns of ob_keys, its split by route rows of
 * ob_key_usage_by_route (one per key and route used). Every daemon adds to both (requests =
 * requests + n) and never writes them over, so daemons sharing the database add up.
 */

/**
 * Adds a flush's deltas, inside the caller's transaction (it holds the change counter). Summed
 * per key first: an UPDATE joined to two rows of one key applies only one of them, and a flush
 * holds two deltas of one key when an earlier flush failed and was put back.
 */
export async function addUsageRows(client: PoolClient, usage: readonly UsageDelta[]): Promise<void> {
  await client.query(
    `UPDATE ob_keys k SET requests = k.requests + u.requests,
       prompt_tokens = k.prompt_tokens + u.prompt_tokens,
       completion_tokens = k.completion_tokens + u.completion_tokens,
       reasoning_tokens = k.reasoning_tokens + u.reasoning_tokens,
       errors = k.errors + u.errors,
       disconnects = k.disconnects + u.disconnects,
       estimated_tokens = k.estimated_tokens + u.estimated_tokens,
       first_used_at = LEAST(k.first_used_at, u.first_used_at),
       last_used_at = GREATEST(k.last_used_at, u.last_used_at)
     FROM (SELECT d->>'keyId' AS id, sum((d->>'requests')::bigint) AS requests,
             sum((d->>'promptTokens')::bigint) AS prompt_tokens, sum((d->>'completionTokens')::bigint) AS completion_tokens,
             sum((d->>'reasoningTokens')::bigint) AS reasoning_tokens, sum((d->>'errors')::bigint) AS errors,
             sum((d->>'disconnects')::bigint) AS disconnects, sum((d->>'estimatedTokens')::bigint) AS estimated_tokens,
             min(d->>'firstUsedAt') AS first_used_at, max(d->>'lastUsedAt') AS last_used_at
           FROM jsonb_array_elements($1::jsonb) AS d GROUP BY d->>'keyId') AS u
     WHERE k.id = u.id`,
    [
      JSON.stringify(
        usage.map((u) => ({
          keyId: u.keyId,
          requests: u.requests,
          promptTokens: u.promptTokens,
          completionTokens: u.completionTokens,
          reasoningTokens: u.reasoningTokens,
          errors: u.errors,
          disconnects: u.disconnects,
          estimatedTokens: u.estimatedTokens,
          firstUsedAt: u.firstUsedAt,
          lastUsedAt: u.lastUsedAt,
        })),
      ),
    ],
  );
  const split = usage.filter((u) => Object.keys(u.byRoute).length > 0);
  if (split.length > 0)
    await addRouteRows(
      client,
      split.map((u) => ({ keyId: u.keyId, byRoute: u.byRoute })),
    );
}

/**
 * Adds to the rows of each key's routes, making those missing; keys the database does not hold
 * are left out, as the UPDATE of ob_keys leaves them out. Summed first: one statement may not
 * change a row twice (two deltas of one key after a failed flush).
 */
async function addRouteRows(client: PoolClient, rows: { keyId: string; byRoute: UsageByRoute }[]): Promise<void> {
  await client.query(
    `INSERT INTO ob_key_usage_by_route AS r (key_id, route, requests, prompt_tokens, completion_tokens)
     SELECT u->>'keyId', e.key, sum((e.value->>'requests')::bigint), sum((e.value->>'promptTokens')::bigint),
       sum((e.value->>'completionTokens')::bigint)
     FROM jsonb_array_elements($1::jsonb) AS u, jsonb_each(u->'byRoute') AS e
     WHERE EXISTS (SELECT 1 FROM ob_keys k WHERE k.id = u->>'keyId')
     GROUP BY u->>'keyId', e.key
     ON CONFLICT (key_id, route) DO UPDATE SET requests = r.requests + excluded.requests,
       prompt_tokens = r.prompt_tokens + excluded.prompt_tokens,
       completion_tokens = r.completion_tokens + excluded.completion_tokens`,
    [JSON.stringify(rows)],
  );
}

/** The split of a key row just inserted (a key put with usage already counted). */
export async function insertRouteRows(client: PoolClient, key: KeyRecord): Promise<void> {
  if (Object.keys(key.usage.byRoute).length > 0)
    await addRouteRows(client, [{ keyId: key.id, byRoute: key.usage.byRoute }]);
}

/** Every key's split, by key id, in the caller's snapshot; a key without rows has none (used before the split existed, or never). */
export async function loadUsageByRoute(client: PoolClient): Promise<Map<string, UsageByRoute>> {
  const { rows } = await client.query<{
    key_id: string;
    route: string;
    requests: string;
    prompt_tokens: string;
    completion_tokens: string;
  }>('SELECT key_id, route, requests, prompt_tokens, completion_tokens FROM ob_key_usage_by_route');
  const raw = new Map<string, UsageByRoute>();
  for (const r of rows) {
    let split = raw.get(r.key_id);
    if (split === undefined) raw.set(r.key_id, (split = {}));
    split[r.route] = {
      requests: Number(r.requests),
      promptTokens: Number(r.prompt_tokens),
      completionTokens: Number(r.completion_tokens),
    };
  }
  // In report order; a copy of rows read, so nothing else holds these objects.
  const out = new Map<string, UsageByRoute>();
  for (const [id, split] of raw) out.set(id, addByRoute({}, split));
  return out;
}

/** `store migrate`: the split of every key copied, replacing what the table held. */
export async function importUsageByRoute(client: PoolClient, keys: readonly KeyRecord[]): Promise<void> {
  await client.query('TRUNCATE ob_key_usage_by_route');
  const rows = keys
    .filter((k) => Object.keys(k.usage.byRoute).length > 0)
    .map((k) => ({ keyId: k.id, byRoute: k.usage.byRoute }));
  // A statement per piece, as the keys themselves (import.ts).
  for (let i = 0; i < rows.length; i += IMPORT_PIECE) await addRouteRows(client, rows.slice(i, i + IMPORT_PIECE));
}
