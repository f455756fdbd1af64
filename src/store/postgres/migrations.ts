import type { PoolClient } from 'pg';

/**
 * The PostgreSQL schema, as numbered steps applied in order and never edited once released: a
 * database records the steps it has (ob_schema_migrations), and a daemon applies the missing ones
 * at start. Add a step to change the schema.
 */
export const MIGRATIONS: readonly { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'instances, keys, audit trail, change log',
    sql: `
      -- One row: the number of the last committed change. Every write transaction increments it
      -- first, so writes are serialised cluster-wide and change numbers have no gaps and appear
      -- in commit order (a sequence would do neither).
      CREATE TABLE ob_meta (id int PRIMARY KEY CHECK (id = 1), change_no bigint NOT NULL);
      INSERT INTO ob_meta VALUES (1, 0);

      -- The records as the daemon knows them (jsonb), with the columns SQL decides on beside them.
      CREATE TABLE ob_instances (
        id text PRIMARY KEY,
        deployment text NOT NULL,
        state text NOT NULL,
        updated_at text NOT NULL,
        record jsonb NOT NULL
      );
      -- Keys: the SHA-256 of the secret and its hint, never the secret. Usage counters are
      -- columns so that each daemon adds to them (requests = requests + n).
      CREATE TABLE ob_keys (
        id text PRIMARY KEY,
        hash text NOT NULL UNIQUE,
        instance text NOT NULL,
        deployment text NOT NULL,
        status text NOT NULL CHECK (status IN ('active', 'revoked')),
        record jsonb NOT NULL,
        requests bigint NOT NULL DEFAULT 0,
        prompt_tokens bigint NOT NULL DEFAULT 0,
        completion_tokens bigint NOT NULL DEFAULT 0,
        last_used_at text
      );
      CREATE INDEX ob_keys_active_by_instance ON ob_keys (instance, deployment) WHERE status = 'active';

      CREATE SEQUENCE ob_event_seq;
      CREATE TABLE ob_events (seq bigint PRIMARY KEY, at text NOT NULL, record jsonb NOT NULL);

      -- What each committed change did, for the other daemons: pushed by NOTIFY (the number
      -- only) and read back by number. origin: the daemon that made it; extra: what the store
      -- did on its behalf (keys revoked that it did not know of).
      CREATE TABLE ob_changes (
        no bigint PRIMARY KEY,
        origin text NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        mutations jsonb NOT NULL,
        extra jsonb NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'per-key limits',
    sql: `
      -- Keys made before limits existed have none (the daemon reads them as all-null too).
      UPDATE ob_keys SET record = record || '{"limits": {"rpm": null, "tpm": null, "concurrency": null}}'::jsonb
        WHERE NOT (record ? 'limits');
    `,
  },
  {
    version: 3,
    name: 'usage: reasoning tokens, errors, client disconnects, first use',
    sql: `
      -- Rows written before these columns existed hold none, which is what was counted then.
      ALTER TABLE ob_keys
        ADD COLUMN reasoning_tokens bigint NOT NULL DEFAULT 0,
        ADD COLUMN errors bigint NOT NULL DEFAULT 0,
        ADD COLUMN disconnects bigint NOT NULL DEFAULT 0,
        ADD COLUMN first_used_at text;
    `,
  },
  {
    version: 4,
    name: 'per-key limit counts shared between daemons',
    sql: `
      -- Each daemon's per-key limit counts, one row per daemon per tick of the clock (a few per
      -- second while it runs): every daemon reads the row each daemon wrote for the tick before,
      -- and splits what is left of each limit the same way (docs/scale-out.md). Short-lived: a
      -- daemon deletes its own old rows, and the one holding the chores those of daemons gone.
      CREATE TABLE ob_limit_counts (
        tick bigint NOT NULL,
        node text NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        counts jsonb NOT NULL,
        PRIMARY KEY (tick, node)
      );
    `,
  },
  {
    version: 5,
    name: 'usage: tokens charged by estimate',
    sql: `
      -- Rows written before this column existed hold none, which is what was counted then.
      ALTER TABLE ob_keys ADD COLUMN estimated_tokens bigint NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 6,
    name: 'revocations apart from the change counter; a row per daemon',
    sql: `
      -- Every revoked key, written in a short transaction of its own that takes no lock any
      -- other write holds (never the ob_meta counter), before the usual change: a revocation
      -- reaches every daemon while the counter is held. Read by each daemon as an outbox: the
      -- rows whose transaction was not visible to its previous read (xid past that snapshot's
      -- xmax, or among its transactions in progress). record: the key without its usage.
      CREATE TABLE ob_revocations (
        key_id text PRIMARY KEY,
        record jsonb NOT NULL,
        origin text NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        xid xid8 NOT NULL DEFAULT pg_current_xact_id()
      );
      CREATE INDEX ob_revocations_by_xid ON ob_revocations (xid);

      -- One row per running daemon, written every catch-up period: proves it can write, and
      -- says how far it has applied the change log and the revocations (applied_revocations:
      -- the xmax of the snapshot of its last read) and when it was last in sync.
      CREATE TABLE ob_daemons (
        origin text PRIMARY KEY,
        host text NOT NULL,
        pid int NOT NULL,
        started_at timestamptz NOT NULL,
        seen_at timestamptz NOT NULL DEFAULT now(),
        applied_change bigint NOT NULL,
        applied_revocations xid8,
        in_sync_at timestamptz
      );
    `,
  },
  {
    version: 7,
    name: 'daemon rows: the whole revocation point, and when a silent daemon refuses every key',
    sql: `
      -- applied_xip: the transactions in progress at its last read of ob_revocations, so that
      -- the point (applied_revocations and these) tells exactly which rows it has applied: a
      -- row is applied when its xid is below the xmax and not among these. max_stale_ms: its
      -- --max-stale, past which a daemon that has not written its row refuses every key.
      -- Rows of older daemons hold neither: they confirm nothing.
      ALTER TABLE ob_daemons ADD COLUMN applied_xip xid8[], ADD COLUMN max_stale_ms int;
    `,
  },
  {
    version: 8,
    name: 'usage split by route',
    sql: `
      -- A key's requests and tokens by the client API they came through (chat, responses,
      -- completions, messages): a row per key and route used, added to by every daemon as the
      -- totals in ob_keys are. Keys used before this existed have no rows: their totals stay.
      CREATE TABLE ob_key_usage_by_route (
        key_id text NOT NULL,
        route text NOT NULL,
        requests bigint NOT NULL DEFAULT 0,
        prompt_tokens bigint NOT NULL DEFAULT 0,
        completion_tokens bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (key_id, route)
      );
    `,
  },
  {
    version: 9,
    name: 'instance aliases',
    sql: `
      -- Other model ids a key of the instance may send, in the instance's record as its other
      -- fields are: no SQL decides on them. Instances added before hold none (the daemon reads
      -- a record without them as none too, from the change log of an older daemon say).
      UPDATE ob_instances SET record = record || '{"aliases": []}'::jsonb WHERE NOT (record ? 'aliases');
    `,
  },
  {
    version: 10,
    name: 'settings: the allowed models',
    sql: `
      -- What the operator sets for the whole store rather than for one instance or key, a row
      -- per setting: 'models', the model ids an instance may be added with (a JSON list). No
      -- row: never set, and each daemon allows its own OB_PROXY_MODELS (or the default ids).
      CREATE TABLE ob_settings (name text PRIMARY KEY, value jsonb NOT NULL);
    `,
  },
  {
    version: 11,
    name: 'usage by the hour',
    sql: `
      -- A key's usage per hour (size 'hour'), added to by every daemon as the totals in ob_keys
      -- are; an hour older than a week is rolled up into its day (size 'day') by the daemon
      -- doing the chores. Usage counted before this existed is in the totals only.
      CREATE TABLE ob_usage_buckets (
        key_id text NOT NULL,
        size text NOT NULL CHECK (size IN ('hour', 'day')),
        start timestamptz NOT NULL,
        requests bigint NOT NULL DEFAULT 0,
        prompt_tokens bigint NOT NULL DEFAULT 0,
        completion_tokens bigint NOT NULL DEFAULT 0,
        errors bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (key_id, size, start)
      );
      CREATE INDEX ob_usage_buckets_by_start ON ob_usage_buckets (start);
    `,
  },
];

/** Advisory lock keys (two int4: ob-proxy's, then the lock's). */
export const LOCK_SPACE = 0x0b9_0c5;
export const MIGRATE_LOCK = 1;
export const CHORES_LOCK = 2;

/**
 * Applies the missing steps under an advisory lock: N daemons starting at once on an empty
 * database migrate it once, the others wait and then find nothing to do. Each step commits with
 * its version row, so a crash leaves a database at a known step.
 */
export async function migrate(client: PoolClient, location: string): Promise<number[]> {
  // Nothing to do is found without writing (no DDL, no lock): a database that has turned
  // read-only (a failover onto a standby) still lets a daemon start and serve from it.
  if (await upToDate(client)) return [];
  await client.query('SELECT pg_advisory_lock($1, $2)', [LOCK_SPACE, MIGRATE_LOCK]);
  try {
    await client.query(
      'CREATE TABLE IF NOT EXISTS ob_schema_migrations (version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const { rows } = await client.query<{ version: number }>('SELECT version FROM ob_schema_migrations');
    const have = new Set(rows.map((r) => r.version));
    const known = Math.max(...MIGRATIONS.map((m) => m.version));
    const newer = rows.map((r) => r.version).filter((v) => v > known);
    if (newer.length > 0) {
      throw new Error(
        `The store ${location} has schema version ${Math.max(...newer)}, newer than this ob-proxy knows (${known}). Run the newer ob-proxy, or restore the database from a backup.`,
      );
    }
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (have.has(m.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO ob_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
      applied.push(m.version);
    }
    return applied;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_SPACE, MIGRATE_LOCK]).catch(() => {});
  }
}

/** Whether every step is applied already (a newer schema is left to migrate() to refuse). */
async function upToDate(client: PoolClient): Promise<boolean> {
  const exists = await client.query<{ t: string | null }>("SELECT to_regclass('ob_schema_migrations')::text AS t");
  if (exists.rows[0]?.t == null) return false;
  const { rows } = await client.query<{ version: number }>('SELECT version FROM ob_schema_migrations');
  const have = new Set(rows.map((r) => r.version));
  const known = Math.max(...MIGRATIONS.map((m) => m.version));
  return MIGRATIONS.every((m) => have.has(m.version)) && [...have].every((v) => v <= known);
}
