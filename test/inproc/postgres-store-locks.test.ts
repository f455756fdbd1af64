/**
 * The PostgreSQL store under locks and stuck transactions: in sync only when revocations are
 * written, writes that time out give their place up, --wait confirms what was applied. One
 * describe per defect found, its story above it.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import type { ConfirmationView } from '../../src/services/revocation-confirmation.js';
import { inprocCli } from '../helpers/inproc-cli.js';
import { TestClock } from '../helpers/inproc.js';
import { type PgDaemon, pgDaemon } from '../helpers/postgres-inproc.js';
import { freshDatabase, type TestDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/processes.js';
import { type Harness, MODEL, startHarness, startSim } from '../reliability/harness.js';

/**
 * Regression: two daemons on one PostgreSQL with --max-stale 3. A session held ob_revocations in
 * SHARE mode (what CREATE INDEX and REINDEX take) and the change counter row FOR UPDATE. A key
 * revoked through daemon A could be written nowhere (A's command exited 1 after 10.6 s), yet
 * daemon B answered it 200 for as long as the lock was held (78 checks over 21 s) while its
 * `status` said in_sync: B read the change log and wrote its own row, and that was all "in
 * sync" asked. Now a daemon is in sync only while it can also write a revocation, through a
 * probe that takes the locks a revocation takes and waits behind them as long as one would:
 * under that lock every daemon refuses every key once --max-stale has passed.
 *
 * Time is the test's clock: the lock is taken, the clock moved past --max-stale, and the
 * verdict taken once each daemon has either read and written since (what the daemons did
 * before) or is stuck writing (what they do now).
 */
describe('a daemon that could not write a revocation is not in sync', () => {
  const MAX_STALE_MS = 3000;
  const open: PgDaemon[] = [];
  let db: TestDatabase | undefined;
  let holder: pg.Client | undefined;

  afterEach(async () => {
    await holder?.end().catch(() => {});
    for (const d of open.splice(0)) await d.close();
    await db?.drop();
  });

  /** In sync as of `at` by its row: a read that began then, and a write of the row after it. */
  async function rowInSyncSince(admin: pg.Client, at: number): Promise<number> {
    const { rows } = await admin.query<{ n: string }>(
      'SELECT count(*) AS n FROM ob_daemons WHERE in_sync_at >= to_timestamp($1::double precision / 1000)',
      [at],
    );
    return Number(rows[0]!.n);
  }

  it('with ob_revocations locked against writes, every daemon refuses every key past --max-stale', async () => {
    db = await freshDatabase();
    const clock = new TestClock();
    const a = await pgDaemon(db.url, clock, { maxStaleMs: MAX_STALE_MS });
    open.push(a);
    const b = await pgDaemon(db.url, clock, { maxStaleMs: MAX_STALE_MS });
    open.push(b);
    const lc = a.daemon.ctx.lifecycle;
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
    await lc.ready('gpu-1');
    const victim = await lc.createKey('gpu-1', 'victim');
    const other = await lc.createKey('gpu-1', 'other');
    for (const d of [a, b])
      for (const k of [victim, other])
        await eventually(async () => (await d.models(k.secret)).status === 200, 'every daemon serves the keys');

    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      holder = new pg.Client({ connectionString: db.url });
      holder.on('error', () => {});
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE ob_revocations IN SHARE MODE');
      await holder.query('SELECT * FROM ob_meta FOR UPDATE');

      // `keys revoke` through A: A refuses the key at once, in its own memory.
      const revoking = inprocCli(a.daemon.management).run('keys', 'revoke', victim.key.id, '--yes');
      await eventually(async () => (await a.models(victim.secret)).status === 401, 'A refuses the revoked key');

      clock.advance(MAX_STALE_MS + 1000);
      const advancedTo = clock.now();
      await eventually(
        async () =>
          (await rowInSyncSince(admin, advancedTo)) === 2 ||
          (a.store.syncProblem() !== null && b.store.syncProblem() !== null),
        'each daemon has read and written since, or is stuck writing',
        15_000,
      );

      const refused = { status: 503, code: 'store_unreachable' };
      for (const d of [a, b]) d.checkStale();
      expect({ victimOnB: await b.models(victim.secret), stateOfB: (await b.status()).storeSync.state }).toEqual({
        victimOnB: refused,
        stateOfB: 'stale',
      });
      for (const d of [a, b]) expect(await d.models(other.secret)).toEqual(refused);
      expect((await b.status()).storeSync.problem).toMatch(/^cannot write/);

      // The lock released: the revocation reaches the database, and the daemons serve again.
      await holder.query('ROLLBACK');
      const revoked = await revoking;
      expect([0, 1]).toContain(revoked.code);
      for (const d of [a, b]) {
        await eventually(() => !d.checkStale(), 'the daemon in sync again', 15_000);
        await eventually(
          async () => (await d.models(victim.secret)).status === 401,
          'the key refused as revoked',
          15_000,
        );
        expect(await d.models(other.secret)).toEqual({ status: 200, code: null });
      }
    } finally {
      await admin.end();
    }
  }, 60_000);
});

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
describe('a write that times out leaves nothing waiting on the server', () => {
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
});

/**
 * Regression: `keys revoke --wait` confirmed a revocation that a live daemon had not applied. The
 * check counted a key's rows of ob_revocations, and a key that ob_keys held revoked with no row
 * there counted as applied by every daemon. With ob_revocations locked (SHARE, what CREATE INDEX
 * takes) and daemon B paused, a key revoked through A went into A's journal and into the change
 * log: `--wait` exited 0 "confirmed" after 5.1 s, B listed as confirmed while one change behind
 * and still serving the key. Now each key's revocation is the ob_revocations row or the change
 * that revoked it, and a daemon confirms it once its report has applied either.
 *
 * B is paused as the others see it: no notifications and a catch-up period longer than the test,
 * so it reads and reports only when the test calls `sync()`.
 */
describe('a revocation is confirmed only once applied', () => {
  const open: PgDaemon[] = [];
  let db: TestDatabase | undefined;
  let holder: pg.Client | undefined;

  afterEach(async () => {
    await holder?.end().catch(() => {});
    for (const d of open.splice(0)) await d.close();
    await db?.drop();
  });

  it('--wait does not confirm a revocation, written only to the change log, that a live daemon has not applied', async () => {
    db = await freshDatabase();
    const clock = new TestClock();
    const a = await pgDaemon(db.url, clock, { maxStaleMs: 30_000 });
    open.push(a);
    const lc = a.daemon.ctx.lifecycle;
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
    await lc.ready('gpu-1');
    const victim = await lc.createKey('gpu-1', 'victim');
    const b = await pgDaemon(db.url, clock, { maxStaleMs: 30_000, notify: false, catchupMs: 600_000 });
    open.push(b);
    expect(await b.models(victim.secret)).toEqual({ status: 200, code: null });

    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      await eventually(
        async () => (await admin.query('SELECT origin FROM ob_daemons')).rowCount === 2,
        'both daemons have reported',
      );
      holder = new pg.Client({ connectionString: db.url });
      holder.on('error', () => {});
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE ob_revocations IN SHARE MODE');

      const cli = inprocCli(a.daemon.management);
      const revoked = await cli.run('keys', 'revoke', victim.key.id, '--yes', '--wait', '--wait-timeout', '2');
      // The change log holds the revocation, ob_revocations does not, and B has not read it.
      const { rows } = await admin.query<{ status: string; shared: boolean }>(
        'SELECT status, EXISTS (SELECT 1 FROM ob_revocations WHERE key_id = $1) AS shared FROM ob_keys WHERE id = $1',
        [victim.key.id],
      );
      expect(rows).toEqual([{ status: 'revoked', shared: false }]);
      expect(await b.models(victim.secret)).toEqual({ status: 200, code: null });
      expect({ code: revoked.code, confirmed: /Confirmed/.test(revoked.stdout) }).toEqual({
        code: 1,
        confirmed: false,
      });
      expect(revoked.stderr).toMatch(/1 of 2 live daemon\(s\) did not confirm: [0-9a-f]{8} \(.*\) .*\(1 behind\)/);
      expect(revoked.stderr).not.toMatch(/this daemon\)/);

      // B resumes: once it has read the change, and said so, the revocation is confirmed.
      await holder.query('ROLLBACK');
      await b.store.sync();
      expect(await b.models(victim.secret)).toMatchObject({ status: 401 });
      const confirmed = await eventually(async () => {
        const v = await cli.client.confirmations({ keys: [victim.key.id] });
        return v.confirmed ? v : undefined;
      }, 'the revocation confirmed by both daemons');
      expect(confirmed.daemons.map((d) => d.confirmed)).toEqual([true, true]);
      expect((confirmed as ConfirmationView).notShared).toEqual([]);
    } finally {
      await admin.end();
    }
  }, 60_000);
});
