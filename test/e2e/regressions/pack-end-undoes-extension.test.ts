/**
 * Regression: a pack extended through daemon A just before it was due, while
 * daemon B (the one ending packs) had not heard of the extension yet. B's timer ended the pack
 * from its stale view, and the store took that halt "decided on a stale view" like a stop: the
 * instance was stopped with the new packEndsAt and every key revoked, on every daemon. The
 * extension the operator was told had succeeded was lost, and the keys with it.
 * Now a pack end is written only if the pack in the database still ends when B thought it did:
 * a pack extended meanwhile is refused by the store, B hears the extension at once and serves
 * the keys again (it refused them from the old packEndsAt meanwhile, as every daemon does), and
 * nothing is revoked.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SimProcess, eventually, startSimulate } from '../../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../../helpers/postgres.js';
import { ServeNodes, modelsStatus } from '../../helpers/serve-nodes.js';

const MODEL = 'gemma4:26b';

let sim: SimProcess;
let db: TestDatabase;
const nodes = new ServeNodes();

beforeAll(async () => {
  sim = await startSimulate([MODEL], ['--chunks', '1']);
  db = await freshDatabase();
});
afterAll(async () => {
  await nodes.stopAll();
  await db?.drop();
  await sim?.stop();
}, 60_000);

it('a pack extended through A just before B ends it stays extended, and its keys keep working', async () => {
  // B first, so it holds the chores (it ends packs); it hears A's changes only when it asks
  // (notifications dropped, a catch-up read every 25 s): the extension reaches it late.
  const b = await nodes.start(db.url, { OB_PROXY_TEST_NO_NOTIFY: '1', OB_PROXY_STORE_CATCHUP_MS: '25000' });
  const a = await nodes.start(db.url, {});
  expect((await b.api.status()).storeSync?.holdsChores).toBe(true);

  const endsAt = new Date(Date.now() + 5000).toISOString();
  await b.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url, packEndsAt: endsAt });
  await b.api.ready('gpu-1', { wait: true });
  const key = await b.api.createKey('gpu-1', 'team');
  const later = new Date(Date.now() + 3_600_000).toISOString();
  expect((await a.api.extend('gpu-1', later)).packEndsAt).toBe(later);
  await eventually(async () => (await modelsStatus(a, key.secret)) === 200, 'A serves the key');

  // Past the old pack end, B's timer has acted once B serves the key again (it heard the
  // extension) or A refuses it (it heard the pack end). Until then B refuses it from its memory.
  await eventually(
    async () =>
      Date.now() > Date.parse(endsAt) &&
      ((await modelsStatus(b, key.secret)) === 200 || (await modelsStatus(a, key.secret)) !== 200),
    "B's pack timer to act",
    15_000,
  );
  expect([await modelsStatus(a, key.secret), await modelsStatus(b, key.secret)]).toEqual([200, 200]);
  for (const n of [a, b]) {
    const inst = await n.api.getInstance('gpu-1');
    expect([inst.state, inst.packEndsAt]).toEqual(['ready', later]);
  }
  const revoked = (await a.api.listKeys('gpu-1')).filter((k) => k.status !== 'active');
  expect(revoked).toEqual([]);
}, 60_000);
