/**
 * Revocations a daemon holds that the PostgreSQL store refused (the database turned read-only):
 * they are in that daemon's memory and journal alone, and no row of ob_daemons can say so (the
 * database refuses the row too). The daemon says it in its session's `application_name`, which
 * a read-only database still takes, and `status` on every daemon shows who holds how many and
 * since when, until the database takes writes and they are written (docs/scale-out.md).
 */
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { UnwrittenHold } from '../../src/services/revocation-confirmation.js';
import { RevocationJournal } from '../../src/store/revocation-journal.js';
import { holdCounter, setReadOnly } from '../helpers/postgres-faults.js';
import { PostgresRig, usePostgresRig } from '../helpers/postgres-rig.js';
import { eventually, runCli, startServe } from '../helpers/processes.js';
import { modelsStatus, type ServeNode } from '../helpers/serve-nodes.js';

const rig = usePostgresRig();

/**
 * How long a wait for a state may take: a catch-up period or two when idle, far more on a machine
 * whose every core is busy. A bound on patience, not on speed.
 */
const WAIT_MS = 30_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function holds(n: ServeNode): Promise<UnwrittenHold[] | undefined> {
  return (await n.api.status()).daemons?.unwritten;
}

/** An ISO time cut to the second, as another daemon reads it from the label. */
function toSecond(iso: string): string {
  return `${iso.slice(0, 19)}.000Z`;
}

it('status on every daemon shows the revocations a daemon holds that a read-only database refused, until written', async () => {
  // A --max-stale longer than the test: the daemons stay live while it reads their status, however
  // long a busy machine makes the waits.
  const { a, b } = await rig.twoDaemons({ OB_PROXY_MAX_STALE: '300' });
  const first = await a.api.createKey('gpu-1', 'first');
  const second = await a.api.createKey('gpu-1', 'second');
  for (const n of [a, b])
    for (const k of [first, second])
      await eventually(async () => (await modelsStatus(n, k.secret)) === 200, 'every daemon serves both keys', WAIT_MS);
  expect(await holds(a)).toEqual([]);
  expect(await holds(b)).toEqual([]);

  await setReadOnly(rig.admin, rig.db.url, true);
  for (const k of [first, second])
    await expect(b.api.revokeKey(k.id)).rejects.toMatchObject({ code: 'store_write_failed' });
  const revokedAt = (await b.api.getKey(first.id)).revokedAt!;
  expect(Date.parse((await b.api.getKey(second.id)).revokedAt!)).toBeGreaterThanOrEqual(Date.parse(revokedAt));

  // B from its memory, at once; A from B's session, once B has set it (a catch-up period).
  const own = await holds(b);
  expect(own).toEqual([{ id: expect.stringMatching(UUID), self: true, revocations: 2, oldestAt: revokedAt }]);
  const bId = own![0]!.id;
  // The label may say 1 for a period (set between the two revocations): A is read until it says 2.
  const seen = [{ id: bId, self: false, revocations: 2, oldestAt: toSecond(revokedAt) }];
  await eventually(
    async () => isDeepStrictEqual(await holds(a), seen),
    `A reads what B holds: ${JSON.stringify(seen)}`,
    WAIT_MS,
  );
  // A knows nothing else of them: it serves the keys until it is stale itself.
  expect(await modelsStatus(a, first.secret)).toBe(200);

  const status = await runCli(['status'], { home: a.serve.home });
  expect(status.code).toBe(0);
  expect(status.stdout).toContain(
    `\nDaemon ${bId.slice(0, 8)} holds 2 revocations the store refused, the oldest made at ${toSecond(revokedAt)}, in its memory and journal alone: it refuses those keys, and the other daemons know nothing of them (each refuses every key once it has not written for --max-stale). They are written once the store takes writes, while that daemon runs.\n`,
  );
  const own2 = await runCli(['status'], { home: b.serve.home });
  expect(own2.stdout).toContain(
    `\nDaemon ${bId.slice(0, 8)} (this) holds 2 revocations the store refused, the oldest made at ${revokedAt}, in its memory`,
  );

  await setReadOnly(rig.admin, rig.db.url, false);
  for (const n of [a, b])
    await eventually(async () => (await holds(n))?.length === 0, 'nothing held unwritten', WAIT_MS);
  for (const k of [first, second])
    await eventually(
      async () => (await modelsStatus(a, k.secret)) === 401,
      'A refuses the written revocations',
      WAIT_MS,
    );
  // B sets its label once the revocations are written, and a session B replaced meanwhile may
  // linger with what it held then: status is read until it names none too.
  await eventually(
    async () => !(await runCli(['status'], { home: a.serve.home })).stdout.includes('the store refused'),
    "A's status names no revocation held unwritten",
    WAIT_MS,
  );
}, 90_000);

/**
 * Regression: the PostgreSQL store turned read-only (a failover onto a standby,
 * `default_transaction_read_only`). Reads went on, so every daemon called itself in sync and
 * `--max-stale` never tripped, while a revocation through daemon B could not be written: daemon A
 * answered the revoked key 200 for as long as it lasted (149 times in 16.7 s). Now each daemon
 * writes a row of its own every catch-up period, and one that cannot write is not in sync: A
 * refuses every key after --max-stale with 503 store_unreachable, `status` says it cannot write
 * and why, and once the database takes writes the revocation is written and refused everywhere.
 */
describe('a daemon that cannot write to PostgreSQL is not in sync', () => {
  const MAX_STALE_S = 2;
  const ENV = { OB_PROXY_MAX_STALE: String(MAX_STALE_S) };

  const rig = usePostgresRig();

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
});

/**
 * Regression: on the PostgreSQL store, a revocation made while the database refused writes lived
 * only in its daemon's memory. After a kill -9 and a restart the key answered 200 again and its
 * row said `active`, though docs/scale-out.md promised it would be written once the database was
 * back (and a daemon could not even start on a read-only database: the schema check wrote). Now
 * such a revocation goes into a journal in the daemon's home, synced before it is acknowledged:
 * the restarted daemon refuses the key at once, writes it when the database takes writes, every
 * daemon then refuses it, and the journal is emptied.
 */
describe('a revocation PostgreSQL refused survives kill -9 of its daemon', () => {
  const rig = usePostgresRig();

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
    expect((await RevocationJournal.readRecords(journal)).map((r) => [r.keyId, r.reason])).toEqual([
      [key.id, 'manual'],
    ]);
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
});

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
describe('a revocation goes through while the counter row is locked', () => {
  const rig = new PostgresRig();
  let holder: pg.Client | undefined;

  beforeAll(() => rig.start());
  afterAll(async () => {
    await holder?.end().catch(() => {});
    await rig.stop();
  }, 60_000);

  it('a key revoked through B while a session holds the counter row is refused by A while it is held', async () => {
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
    // While the row was still held (B answers only once its wait for the row times out): the
    // revocation reached A without it. How soon is the logged figure, not a bound.
    expect(refusedMs).toBeLessThan(answeredMs);
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
    await eventually(async () => (await modelsStatus(a, second.secret)) === 401, 'A refuses the second key');
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
});
