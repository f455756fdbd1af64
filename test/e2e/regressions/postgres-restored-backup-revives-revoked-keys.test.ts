/**
 * Regression: the PostgreSQL store restored from an older backup while the
 * daemons run (or a failover to a replica that lagged). The change counter went back, and:
 * - a running daemon, whose last change number was now ahead of the database's, read "no
 *   changes" every period and stayed "in sync": every later change numbered up to its old
 *   number was skipped, so a key revoked after the restore through another daemon was still
 *   answered 200 by it, for ever;
 * - a key revoked before the restore was active again in the database, and a daemon started
 *   (or restarted) afterwards served it.
 * Now a daemon whose change number is ahead of the database's, or whose last change the
 * database no longer holds as it heard it, reloads the whole state, and writes back every
 * revocation it knows that the database lacks ("revoked wins", as the lowdb store does with
 * its revocation journal): each revocation is refused by every daemon, old and new.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventually } from '../../helpers/processes.js';
import { PostgresRig } from '../../helpers/postgres-rig.js';
import { modelsStatus } from '../../helpers/serve-nodes.js';

const TABLES = ['ob_meta', 'ob_instances', 'ob_keys', 'ob_events', 'ob_changes'];
const ENV = { OB_PROXY_STORE_CATCHUP_MS: '250' };

const rig = new PostgresRig();

/** A backup as pg_dump takes it: a copy of every table of the store, and the event sequence. */
async function backup(): Promise<number> {
  for (const t of TABLES) await rig.admin.query(`CREATE TABLE bk_${t} AS SELECT * FROM ${t}`);
  const { rows } = await rig.admin.query<{ last_value: string }>('SELECT last_value FROM ob_event_seq');
  return Number(rows[0]!.last_value);
}

/** Restores it in place, as `pg_restore --clean` would, while the daemons run. */
async function restore(eventSeq: number): Promise<void> {
  await rig.admin.query('BEGIN');
  await rig.admin.query(`TRUNCATE ${TABLES.join(', ')}`);
  for (const t of TABLES) await rig.admin.query(`INSERT INTO ${t} SELECT * FROM bk_${t}`);
  await rig.admin.query('SELECT setval($1, $2)', ['ob_event_seq', eventSeq]);
  await rig.admin.query('COMMIT');
}

beforeAll(() => rig.start());
afterAll(() => rig.stop(), 60_000);

it('a database restored from an older backup: revocations made before and after it hold on every daemon', async () => {
  const { a, b } = await rig.twoDaemons(ENV);
  const early = await a.api.createKey('gpu-1', 'early');
  const late = await a.api.createKey('gpu-1', 'late');
  for (const n of [a, b])
    for (const k of [early, late])
      await eventually(async () => (await modelsStatus(n, k.secret)) === 200, 'every daemon serves both keys');
  const seq = await backup();

  // Revoked after the backup was taken: enough changes that the daemons' numbers pass the backup's.
  await a.api.revokeKey(early.id);
  for (let i = 0; i < 3; i++) await a.api.revokeKey((await a.api.createKey('gpu-1', `filler-${i}`)).id);
  for (const n of [a, b])
    await eventually(async () => (await modelsStatus(n, early.secret)) === 401, 'every daemon refuses the early key');

  await restore(seq);
  // Revoked through A after the restore: its change number is one B had already passed.
  await a.api.revokeKey(late.id);

  for (const n of [a, b])
    await eventually(
      async () => (await modelsStatus(n, late.secret)) === 401,
      'every daemon refuses the late key',
      10_000,
    );
  // A daemon started now reads the database: the early revocation was written back into it.
  const c = await rig.nodes.start(rig.db.url, ENV);
  await eventually(
    async () => (await modelsStatus(c, early.secret)) === 401 && (await modelsStatus(c, late.secret)) === 401,
    'a daemon started after the restore refuses both keys',
    10_000,
  );
  const { rows } = await rig.admin.query<{ id: string; status: string }>(
    'SELECT id, status FROM ob_keys WHERE id = ANY($1) ORDER BY id',
    [[early.id, late.id]],
  );
  expect(rows.map((r) => r.status)).toEqual(['revoked', 'revoked']);
  // One key.revoked event each in the trail, though both running daemons reloaded at once.
  const events = await rig.admin.query<{ n: string }>(
    "SELECT record->>'keyId' AS id, count(*) AS n FROM ob_events WHERE record->>'type' = 'key.revoked' AND record->>'keyId' = ANY($1) GROUP BY 1 ORDER BY 1",
    [[early.id, late.id]],
  );
  expect(events.rows.map((r) => Number(r.n))).toEqual([1, 1]);
  // Both daemons that ran said what happened.
  for (const n of [a, b]) expect(n.serve.lines.join('\n')).toContain('went back from change');
  // The key that was never revoked still works everywhere.
  const fresh = await a.api.createKey('gpu-1', 'after');
  for (const n of [a, b, c])
    await eventually(async () => (await modelsStatus(n, fresh.secret)) === 200, 'every daemon serves a new key');
}, 60_000);
