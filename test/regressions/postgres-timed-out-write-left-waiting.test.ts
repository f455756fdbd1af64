/**
 * Regression: a transaction left open on the PostgreSQL store (an operator's
 * `psql` session, a stuck job) holding the change counter. A write through a daemon waited for
 * it and gave up after 10 s, but only on the daemon's side (node-postgres's query_timeout):
 * the server went on waiting for the lock, holding its place in the queue, and each later write
 * (every management change, every usage flush of every daemon) left one more backend waiting
 * behind it, until the connections PostgreSQL allows ran out and every daemon lost the store.
 * Now the server itself cancels a statement at the store's time-out (statement_timeout, just
 * under the client's), so a write that gives up leaves nothing behind; the lock's holder ending
 * lets writes through again at once.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/processes.js';
import { type Harness, MODEL, startHarness, startSim } from '../reliability/harness.js';

let sim: Simulator;
let simUrl: string;
let db: TestDatabase;
let admin: pg.Client;
let h: Harness;
let api: DaemonClient;

beforeAll(async () => {
  ({ sim, url: simUrl } = await startSim({ chunks: 1 }));
  db = await freshDatabase();
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  h = await startHarness({ store: db.url });
  api = new DaemonClient(h.config.socket);
});
afterAll(async () => {
  await api?.close().catch(() => {});
  await h?.stop();
  await admin?.end();
  await db?.drop();
  await sim?.close();
}, 60_000);

/** Backends of the store's database other than the admin's, waiting for a lock. */
async function waiting(): Promise<number> {
  const { rows } = await admin.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`,
  );
  return Number(rows[0]!.n);
}

it('a write that timed out behind a stuck transaction leaves no statement waiting in the server', async () => {
  await api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: simUrl });
  await api.ready('gpu-1', { wait: true });
  await eventually(async () => (await api.listKeys('gpu-1')).length === 1, 'the default key');

  await admin.query('BEGIN');
  await admin.query('SELECT change_no FROM ob_meta WHERE id = 1 FOR UPDATE');
  const refused = await api.createKey('gpu-1', 'team').then(
    () => null,
    (err: unknown) => err as { code?: string; message: string },
  );
  expect(refused?.code).toBe('store_write_failed');
  expect(refused?.message).toMatch(/could not be written \(.*\); nothing was changed/);
  // The daemon gave up: so has the server.
  await eventually(async () => (await waiting()) === 0, 'no statement of the daemon still waiting', 5_000);

  await admin.query('ROLLBACK');
  const key = await api.createKey('gpu-1', 'team');
  expect((await api.listKeys('gpu-1')).map((k) => k.name).sort()).toEqual(['default', 'team']);
  expect(key.secret).toMatch(/^ob_sk_/);
}, 60_000);
