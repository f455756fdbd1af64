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
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { inprocCli } from '../helpers/inproc-cli.js';
import { TestClock } from '../helpers/inproc.js';
import { type PgDaemon, pgDaemon } from '../helpers/postgres-inproc.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/processes.js';

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
