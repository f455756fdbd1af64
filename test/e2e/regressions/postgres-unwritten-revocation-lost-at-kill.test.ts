/**
 * Regression: on the PostgreSQL store, a revocation made while the database refused writes lived
 * only in its daemon's memory. After a kill -9 and a restart the key answered 200 again and its
 * row said `active`, though docs/scale-out.md promised it would be written once the database was
 * back (and a daemon could not even start on a read-only database: the schema check wrote). Now
 * such a revocation goes into a journal in the daemon's home, synced before it is acknowledged:
 * the restarted daemon refuses the key at once, writes it when the database takes writes, every
 * daemon then refuses it, and the journal is emptied.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DaemonClient } from '../../../cli/daemon-client.js';
import { RevocationJournal } from '../../../src/store/revocation-journal.js';
import { eventually, startServe } from '../../helpers/processes.js';
import { PostgresRig } from '../../helpers/postgres-rig.js';
import { setReadOnly } from '../../helpers/postgres-faults.js';
import { modelsStatus } from '../../helpers/serve-nodes.js';

const rig = new PostgresRig();

beforeAll(() => rig.start());
afterAll(() => rig.stop(), 60_000);

it('a revocation the database refused survives kill -9 of its daemon and is written once it takes writes', async () => {
  const { a, b } = await rig.twoDaemons();
  const key = await a.api.createKey('gpu-1', 'revoked');
  const kept = await a.api.createKey('gpu-1', 'kept');
  for (const n of [a, b]) await eventually(async () => (await modelsStatus(n, key.secret)) === 200, 'served');

  await setReadOnly(rig.admin, rig.db.url, true);
  await expect(b.api.revokeKey(key.id)).rejects.toMatchObject({
    code: 'store_write_failed',
    message: expect.stringMatching(/^Revoked in the running daemon and recorded in the revocation journal/),
  });
  const journal = join(b.serve.home, 'postgres.revocations');
  expect((await RevocationJournal.readRecords(journal)).map((r) => [r.keyId, r.reason])).toEqual([[key.id, 'manual']]);
  b.serve.proc.kill('SIGKILL');
  await b.serve.exited;
  await b.api.close();

  // Restarted on the database still read-only: it starts, and refuses the key at once.
  const b2 = {
    serve: await startServe(b.serve.home, ['--store', rig.db.url]),
    api: new DaemonClient(join(b.serve.home, 'ob-proxy.sock')),
  };
  rig.nodes.all.push(b2);
  expect(await modelsStatus(b2, key.secret)).toBe(401);
  expect(await modelsStatus(b2, kept.secret)).toBe(200);
  expect((await b2.api.listKeys('gpu-1')).find((k) => k.id === key.id)).toMatchObject({
    status: 'revoked',
    revokeReason: 'manual',
  });

  await setReadOnly(rig.admin, rig.db.url, false);
  await eventually(
    async () => (await modelsStatus(a, key.secret)) === 401,
    'A refuses the key once the database takes writes',
    10_000,
  );
  expect(await modelsStatus(a, kept.secret)).toBe(200);
  await eventually(
    async () => {
      const { rows } = await rig.admin.query<{ status: string; reason: string }>(
        "SELECT status, record->>'revokeReason' AS reason FROM ob_keys WHERE id = $1",
        [key.id],
      );
      return rows[0]?.status === 'revoked' && rows[0].reason === 'manual';
    },
    'its row says revoked',
    10_000,
  );
  const events = await rig.admin.query<{ n: string }>(
    "SELECT count(*) AS n FROM ob_events WHERE record->>'type' = 'key.revoked' AND record->>'keyId' = $1",
    [key.id],
  );
  expect(Number(events.rows[0]!.n)).toBe(1);
  // Written: the journal no longer holds it.
  await eventually(async () => (await RevocationJournal.readRecords(journal)).length === 0, 'the journal emptied');
  // A daemon started now refuses it too, from the database alone.
  const c = await rig.nodes.start(rig.db.url);
  expect(await modelsStatus(c, key.secret)).toBe(401);
  expect(await modelsStatus(c, kept.secret)).toBe(200);
}, 90_000);
