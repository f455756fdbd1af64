import type { PoolClient } from 'pg';
import type { StoreData } from '../store.js';
import { importUsageByRoute } from './usage.js';
import { importBuckets } from './usage-buckets.js';
import { pieces } from './import-pieces.js';

export interface TableCounts {
  instances: number;
  keys: number;
  activeKeys: number;
  revokedKeys: number;
  events: number;
  requests: number;
}

export function countsOf(data: StoreData): TableCounts {
  return {
    instances: data.instances.length,
    keys: data.keys.length,
    activeKeys: data.keys.filter((k) => k.status === 'active').length,
    revokedKeys: data.keys.filter((k) => k.status === 'revoked').length,
    events: data.events.length,
    requests: data.keys.reduce((n, k) => n + k.usage.requests, 0),
  };
}

export async function countTables(client: PoolClient): Promise<TableCounts> {
  const { rows } = await client.query<Record<keyof TableCounts, string>>(`SELECT
    (SELECT count(*) FROM ob_instances) AS instances,
    (SELECT count(*) FROM ob_keys) AS keys,
    (SELECT count(*) FROM ob_keys WHERE status = 'active') AS "activeKeys",
    (SELECT count(*) FROM ob_keys WHERE status = 'revoked') AS "revokedKeys",
    (SELECT count(*) FROM ob_events) AS events,
    (SELECT coalesce(sum(requests), 0) FROM ob_keys) AS requests`);
  const r = rows[0]!;
  return {
    instances: Number(r.instances),
    keys: Number(r.keys),
    activeKeys: Number(r.activeKeys),
    revokedKeys: Number(r.revokedKeys),
    events: Number(r.events),
    requests: Number(r.requests),
  };
}

/**
 * Writes a whole store into the tables, in one transaction, replacing what they held. Records go
 * in as they are (a pending instance's active keys included, which a key creation would refuse),
 * events keep their numbers, and the event sequence continues after them. The change counter
 * jumps by two with no change recorded: a daemon already following this database sees a gap and
 * reloads everything.
 */
export async function importData(client: PoolClient, data: StoreData): Promise<void> {
  await client.query('UPDATE ob_meta SET change_no = change_no + 2 WHERE id = 1');
  await client.query('TRUNCATE ob_instances, ob_keys, ob_events, ob_changes');
  for (const part of pieces(data.instances))
    await client.query(
      `INSERT INTO ob_instances (id, deployment, state, updated_at, record)
     SELECT r->>'id', r->>'deployment', r->>'state', r->>'updatedAt', r FROM jsonb_array_elements($1::jsonb) AS r`,
      [part],
    );
  for (const part of pieces(data.keys))
    await client.query(
      `INSERT INTO ob_keys (id, hash, instance, deployment, status, record, requests, prompt_tokens, completion_tokens, last_used_at, reasoning_tokens, errors, disconnects, first_used_at, estimated_tokens)
     SELECT r->>'id', r->>'hash', r->>'instance', r->>'deployment', r->>'status', r - 'usage' - 'lastUsedAt',
       (r->'usage'->>'requests')::bigint, (r->'usage'->>'promptTokens')::bigint, (r->'usage'->>'completionTokens')::bigint, r->>'lastUsedAt',
       coalesce((r->'usage'->>'reasoningTokens')::bigint, 0), coalesce((r->'usage'->>'errors')::bigint, 0), coalesce((r->'usage'->>'disconnects')::bigint, 0), r->'usage'->>'firstUsedAt',
       coalesce((r->'usage'->>'estimatedTokens')::bigint, 0)
     FROM jsonb_array_elements($1::jsonb) AS r`,
      [part],
    );
  await importUsageByRoute(client, data.keys);
  for (const part of pieces(data.events))
    await client.query(
      "INSERT INTO ob_events (seq, at, record) SELECT (r->>'seq')::bigint, r->>'at', r FROM jsonb_array_elements($1::jsonb) AS r",
      [part],
    );
  await importBuckets(client, data.usageBuckets ?? []);
  await client.query('DELETE FROM ob_settings');
  if (data.models != null)
    await client.query(`INSERT INTO ob_settings (name, value) VALUES ('models', $1)`, [JSON.stringify(data.models)]);
  const maxSeq = data.events.reduce((m, e) => Math.max(m, e.seq), 0);
  await client.query("SELECT setval('ob_event_seq', $1, $2)", [Math.max(maxSeq, 1), maxSeq > 0]);
}
