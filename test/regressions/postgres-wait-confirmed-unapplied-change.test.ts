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
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import type { ConfirmationView } from '../../src/services/revocation-confirmation.js';
import { inprocCli } from '../helpers/inproc-cli.js';
import { TestClock } from '../helpers/inproc.js';
import { type PgDaemon, pgDaemon } from '../helpers/postgres-inproc.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/processes.js';

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
    expect({ code: revoked.code, confirmed: /Confirmed/.test(revoked.stdout) }).toEqual({ code: 1, confirmed: false });
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
