/**
 * Regression: on the PostgreSQL store, a session held the change counter row (`BEGIN; SELECT *
 * FROM ob_meta FOR UPDATE; …`). Every write takes that row first, the revocation's too, so a key
 * revoked through daemon B reached no other daemon while the lock was held: daemon A answered it
 * 200 for as long (212 times in 25 s), `status` called A in sync, and `keys revoke` exited 1
 * after 9 s saying the store could not be written. Now a revocation is first committed to
 * ob_revocations, a table no write locks, and every daemon reads it beside the change log: A
 * refuses the key within a second while the lock is held, and the revocation succeeds, saying
 * that its row and audit event wait for the lock.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventually, runCli } from '../../helpers/processes.js';
import { PostgresRig } from '../../helpers/postgres-rig.js';
import { holdCounter } from '../../helpers/postgres-faults.js';
import { modelsStatus } from '../../helpers/serve-nodes.js';

const rig = new PostgresRig();
let holder: pg.Client | undefined;

beforeAll(() => rig.start());
afterAll(async () => {
  await holder?.end().catch(() => {});
  await rig.stop();
}, 60_000);

it('a key revoked through B while a session holds the counter row is refused by A within 1 s', async () => {
  const { a, b } = await rig.twoDaemons();
  const [first, second, kept] = [
    await a.api.createKey('gpu-1', 'first'),
    await a.api.createKey('gpu-1', 'second'),
    await a.api.createKey('gpu-1', 'kept'),
  ];
  for (const k of [first, second, kept])
    await eventually(async () => (await modelsStatus(b, k.secret)) === 200, 'B serves the keys');

  holder = await holdCounter(rig.db.url);
  // A is polled from before the revocation is sent until it refuses.
  const sent = Date.now();
  let refusedAt: number | null = null;
  const polling = (async () => {
    while (refusedAt === null && Date.now() - sent < 20_000) {
      if ((await modelsStatus(a, first.secret)) === 401) refusedAt = Date.now();
    }
  })();
  const answer = await b.api.revokeKey(first.id);
  const answeredMs = Date.now() - sent;
  await polling;
  expect(refusedAt).not.toBeNull();
  const refusedMs = refusedAt! - sent;
  console.log(`A refused the key ${refusedMs} ms after the revocation was sent; B answered after ${answeredMs} ms`);
  expect(refusedMs).toBeLessThan(1000);
  // The revocation is done, and says what is left to write.
  expect(answer).toMatchObject({ id: first.id, status: 'revoked', revokeReason: 'manual' });
  expect(answer.storePending).toMatch(/could not be written \(55P03: canceling statement due to lock timeout\)/);

  // The CLI says the same, and exits 0.
  const cli = await runCli(['keys', 'revoke', second.id, '--yes'], { home: b.serve.home });
  expect(cli.stderr).toBe('');
  expect(cli.code).toBe(0);
  expect(cli.stdout).toMatch(
    new RegExp(
      `^Revoked key ${second.id} \\("second"\\) of instance gpu-1\\. It answers 401 from now on\\.\\nEvery daemon refuses it; its row and audit event are not in the store yet \\(.*lock timeout.*\\) and are written as soon as it takes writes\\.\\n$`,
    ),
  );
  await eventually(async () => (await modelsStatus(a, second.secret)) === 401, 'A refuses the second key', 1500);
  // The lock does not stop A being in sync, nor serving the other key.
  expect((await a.api.status()).storeSync).toMatchObject({ state: 'in_sync', problem: null });
  expect(await modelsStatus(a, kept.secret)).toBe(200);
  const { rows: held } = await rig.admin.query<{ status: string }>('SELECT status FROM ob_keys WHERE id = $1', [
    first.id,
  ]);
  expect(held[0]!.status).toBe('active');

  // The lock released: the rest is written (rows, one audit event each).
  await holder.query('ROLLBACK');
  await eventually(
    async () => {
      const { rows } = await rig.admin.query<{ status: string }>('SELECT status FROM ob_keys WHERE id = ANY($1)', [
        [first.id, second.id],
      ]);
      return rows.length === 2 && rows.every((r) => r.status === 'revoked');
    },
    'both rows say revoked',
    15_000,
  );
  const events = await rig.admin.query<{ id: string; n: string }>(
    "SELECT record->>'keyId' AS id, count(*) AS n FROM ob_events WHERE record->>'type' = 'key.revoked' GROUP BY 1 ORDER BY 1",
  );
  expect(events.rows.map((r) => [r.id, Number(r.n)])).toEqual([first.id, second.id].sort().map((id) => [id, 1]));
  expect(await modelsStatus(a, kept.secret)).toBe(200);
  expect(await modelsStatus(b, kept.secret)).toBe(200);
}, 90_000);
