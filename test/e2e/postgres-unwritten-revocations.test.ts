/**
 * Revocations a daemon holds that the PostgreSQL store refused (the database turned read-only):
 * they are in that daemon's memory and journal alone, and no row of ob_daemons can say so (the
 * database refuses the row too). The daemon says it in its session's `application_name`, which
 * a read-only database still takes, and `status` on every daemon shows who holds how many and
 * since when, until the database takes writes and they are written (docs/scale-out.md).
 */
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { UnwrittenHold } from '../../src/services/revocation-confirmation.js';
import { eventually, runCli } from '../helpers/processes.js';
import { PostgresRig } from '../helpers/postgres-rig.js';
import { setReadOnly } from '../helpers/postgres-faults.js';
import type { ServeNode } from '../helpers/serve-nodes.js';
import { modelsStatus } from '../helpers/serve-nodes.js';

const rig = new PostgresRig();

beforeAll(() => rig.start());
afterAll(() => rig.stop(), 60_000);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function holds(n: ServeNode): Promise<UnwrittenHold[] | undefined> {
  return (await n.api.status()).daemons?.unwritten;
}

/** An ISO time cut to the second, as another daemon reads it from the label. */
function toSecond(iso: string): string {
  return `${iso.slice(0, 19)}.000Z`;
}

it('status on every daemon shows the revocations a daemon holds that a read-only database refused, until written', async () => {
  // The default --max-stale (30 s): the daemons stay live while the test reads their status.
  const { a, b } = await rig.twoDaemons();
  const first = await a.api.createKey('gpu-1', 'first');
  const second = await a.api.createKey('gpu-1', 'second');
  for (const n of [a, b])
    for (const k of [first, second])
      await eventually(async () => (await modelsStatus(n, k.secret)) === 200, 'every daemon serves both keys');
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
  for (const n of [a, b]) await eventually(async () => (await holds(n))?.length === 0, 'nothing held unwritten');
  for (const k of [first, second])
    await eventually(async () => (await modelsStatus(a, k.secret)) === 401, 'A refuses the written revocations');
  const after = await runCli(['status'], { home: a.serve.home });
  expect(after.stdout).not.toContain('the store refused');
}, 90_000);
