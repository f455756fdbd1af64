/**
 * Regression: a daemon of a PostgreSQL cluster paused (Ctrl-Z, a container or VM pause) inside
 * its usage flush. Its session stayed `idle in transaction` with the change counter row locked,
 * because the pool set no idle-in-transaction time-out, so every write of every daemon failed
 * (each after 10 s) for as long as it stayed paused. Now the pool's sessions carry
 * `idle_in_transaction_session_timeout` (4 s) and a lock time-out just above it (5 s): the
 * server ends the paused session, and a write waiting behind it goes through.
 *
 * The paused daemon is a session opened with the daemons' own pool settings, left idle in
 * transaction holding the row, as a daemon stopped between two statements of its flush leaves it.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { POOL_SESSION_SETTINGS } from '../../../src/store/postgres/pools.js';
import { eventually } from '../../helpers/processes.js';
import { PostgresRig } from '../../helpers/postgres-rig.js';
import { holdCounter } from '../../helpers/postgres-faults.js';
import { modelsStatus } from '../../helpers/serve-nodes.js';

const rig = new PostgresRig();
let paused: pg.Client | undefined;

beforeAll(() => rig.start());
afterAll(async () => {
  await paused?.end().catch(() => {});
  await rig.stop();
}, 60_000);

it('a peer paused holding the counter row blocks the cluster’s writes for the idle-in-transaction time-out only', async () => {
  const { a, b } = await rig.twoDaemons();

  paused = await holdCounter(rig.db.url, POOL_SESSION_SETTINGS);
  const ended = new Promise<Error>((resolve) => paused!.once('error', resolve));
  // A write through A waits for the row, and gets it once the server ends the paused session
  // (what ends it is the server's idle-in-transaction time-out, not the write's lock time-out).
  const created = await a.api.createKey('gpu-1', 'after-pause');
  expect(created.secret).toMatch(/^ob_sk_/);
  expect((await ended).message).toMatch(/idle-in-transaction timeout/);
  // The paused session was ended by the server, with its lock: nothing is left idle in a transaction.
  const idle = await rig.admin.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
  );
  expect(Number(idle.rows[0]!.n)).toBe(0);
  await expect(paused.query('SELECT 1')).rejects.toThrow(/not queryable|terminat/);
  await eventually(async () => (await modelsStatus(b, created.secret)) === 200, 'B serves the new key', 2000);
  const { rows } = await rig.admin.query<{ n: string }>(
    "SELECT count(*) AS n FROM ob_keys WHERE record->>'name' = 'after-pause' AND status = 'active'",
  );
  expect(Number(rows[0]!.n)).toBe(1);
}, 60_000);
