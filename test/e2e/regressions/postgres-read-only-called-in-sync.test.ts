/**
 * Regression: the PostgreSQL store turned read-only (a failover onto a standby,
 * `default_transaction_read_only`). Reads went on, so every daemon called itself in sync and
 * `--max-stale` never tripped, while a revocation through daemon B could not be written: daemon A
 * answered the revoked key 200 for as long as it lasted (149 times in 16.7 s). Now each daemon
 * writes a row of its own every catch-up period, and one that cannot write is not in sync: A
 * refuses every key after --max-stale with 503 store_unreachable, `status` says it cannot write
 * and why, and once the database takes writes the revocation is written and refused everywhere.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventually, runCli } from '../../helpers/processes.js';
import { PostgresRig } from '../../helpers/postgres-rig.js';
import { setReadOnly } from '../../helpers/postgres-faults.js';
import { modelsStatus } from '../../helpers/serve-nodes.js';

const MAX_STALE_S = 2;
const ENV = { OB_PROXY_MAX_STALE: String(MAX_STALE_S) };

const rig = new PostgresRig();

beforeAll(() => rig.start());
afterAll(() => rig.stop(), 60_000);

it('a database that refuses writes makes every daemon stale within --max-stale; the revocation holds once it takes writes', async () => {
  const { a, b } = await rig.twoDaemons(ENV);
  const revoked = await a.api.createKey('gpu-1', 'revoked');
  const kept = await a.api.createKey('gpu-1', 'kept');
  for (const n of [a, b])
    for (const k of [revoked, kept])
      await eventually(async () => (await modelsStatus(n, k.secret)) === 200, 'every daemon serves both keys');

  const turned = Date.now();
  await setReadOnly(rig.admin, rig.db.url, true);
  const refusal = await b.api.revokeKey(revoked.id).then(
    () => null,
    (err: unknown) => err as { code?: string; message: string },
  );
  expect(refusal?.code).toBe('store_write_failed');
  expect(refusal?.message).toMatch(
    /^Revoked in the running daemon and recorded in the revocation journal, so it holds after a restart; but the store could not be written \(The store postgres:\/\/\S+ could not be written \(25006: cannot execute UPDATE in a read-only transaction\); nothing was changed\. Check that PostgreSQL is running and reachable\.\) The rest of the change is retried with the next write: the other daemons refuse the key once it is written\.$/,
  );
  expect(await modelsStatus(b, revoked.secret)).toBe(401);

  // A never heard of the revocation: it refuses every key once it has not written for --max-stale.
  await eventually(
    async () => (await modelsStatus(a, revoked.secret)) === 503 && (await modelsStatus(a, kept.secret)) === 503,
    'A refuses every key',
    MAX_STALE_S * 1000 + 3000,
  );
  const staleMs = Date.now() - turned;
  console.log(`A refused every key ${staleMs} ms after the database turned read-only (--max-stale ${MAX_STALE_S} s)`);
  const res = await fetch(`${a.serve.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${kept.secret}` } });
  expect(res.status).toBe(503);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe('store_unreachable');
  expect((await a.api.status()).storeSync).toMatchObject({
    state: 'stale',
    problem: 'cannot write: 25006: cannot execute INSERT in a read-only transaction',
  });
  const status = await runCli(['status'], { home: a.serve.home });
  expect(status.stdout).toMatch(
    /\(shared\): stale: out of sync for longer than --max-stale \(2\.0 s\), every key refused with 503; last in sync [\d.]+ s ago \([^)]+\); cannot write: 25006: cannot execute INSERT in a read-only transaction; /,
  );

  await setReadOnly(rig.admin, rig.db.url, false);
  await eventually(
    async () => (await modelsStatus(a, revoked.secret)) === 401 && (await modelsStatus(a, kept.secret)) === 200,
    'A refuses the revoked key and serves the other',
    15_000,
  );
  expect((await a.api.status()).storeSync).toMatchObject({ state: 'in_sync', problem: null });
  await eventually(
    async () => {
      const { rows } = await rig.admin.query<{ status: string }>('SELECT status FROM ob_keys WHERE id = $1', [
        revoked.id,
      ]);
      return rows[0]?.status === 'revoked';
    },
    'the row says revoked',
    10_000,
  );
  expect(await modelsStatus(b, kept.secret)).toBe(200);
}, 90_000);
