/**
 * The label a daemon's session carries (unwritten-label.ts) follows what it holds unwritten as
 * the ledger changes, not at the next catch-up period: the other daemons' `status` reads it.
 * The period here is an hour, so only the change itself can have set the label.
 */
import pg from 'pg';
import { afterEach, expect, it } from 'vitest';
import { UNWRITTEN_LABELS } from '../../src/store/postgres/unwritten-label.js';
import { TestClock } from '../helpers/inproc.js';
import { type PgDaemon, pgDaemon } from '../helpers/postgres-inproc.js';
import { setReadOnly } from '../helpers/postgres-faults.js';
import { freshDatabase, type TestDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/processes.js';

const HOUR_MS = 3_600_000;
let db: TestDatabase | undefined;
let admin: pg.Client | undefined;
let daemon: PgDaemon | undefined;

afterEach(async () => {
  await daemon?.close();
  await admin?.end();
  await db?.drop();
});

interface Held {
  origin: string;
  count: number;
  oldest_at: string | null;
}

it('revocations the database refused are on the session label at once, with no period passing', async () => {
  db = await freshDatabase();
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  const clock = new TestClock();
  daemon = await pgDaemon(db.url, clock, { maxStaleMs: HOUR_MS, catchupMs: HOUR_MS });
  const lc = daemon.daemon.ctx.lifecycle;
  await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
  await lc.ready('gpu-1');
  const first = await lc.createKey('gpu-1', 'first');
  const second = await lc.createKey('gpu-1', 'second');
  const held = async () => (await admin!.query<Held>(UNWRITTEN_LABELS)).rows;
  expect(await held()).toEqual([]);

  // Every session ended, the daemon's own among them: only a relabel opens another before the hour.
  await setReadOnly(admin, db.url, true);
  for (const k of [first, second])
    await expect(lc.revokeKey(k.key.id)).rejects.toMatchObject({ code: 'store_write_failed' });
  const revokedAt = lc.getKey(first.key.id).revokedAt!;

  const origin = daemon.store.origin;
  const expected: Held[] = [{ origin, count: 2, oldest_at: `${revokedAt.slice(0, 19)}.000Z` }];
  await eventually(
    async () => JSON.stringify(await held()) === JSON.stringify(expected),
    `the label says ${JSON.stringify(expected)}`,
  );
  expect(await held()).toEqual(expected);
  await setReadOnly(admin, db.url, false);
}, 60_000);
