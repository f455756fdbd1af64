/**
 * Regression ("A revocation lost at shutdown", second half): operations.md says to
 * back up db.json; restoring an older copy brought back, active, every key revoked since the
 * backup. The revocation journal beside db.json is replayed over whatever db.json holds at every
 * start, so restoring db.json (and its journal of commits) cannot revive a revoked key.
 */
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postChat } from '../../helpers/chat.js';
import { type SimProcess, cliJson, startServe, startSimulate, tmpHome } from '../../helpers/processes.js';
import { chat, readyInstance } from '../../helpers/store-home.js';

let sim: SimProcess;
beforeAll(async () => {
  sim = await startSimulate(['gemma4:26b']);
});
afterAll(() => sim.stop());

it('keys revoked after a backup stay revoked when that backup is restored', async () => {
  const home = await tmpHome();
  const serve = await startServe(home);
  const a = await readyInstance(home, 'gpu-1', sim.url);
  const manual = await cliJson<{ id: string; secret: string }>(
    ['keys', 'create', '--instance', 'gpu-1', '--name', 'manual'],
    home,
  );
  const kept = await readyInstance(home, 'gpu-2', sim.url);
  // The backup, taken while the daemon runs, as operations.md says (db.json, then its journal of
  // commits since): every key active.
  await copyFile(join(home, 'db.json'), join(home, 'backup.json'));
  await copyFile(join(home, 'db.json.journal'), join(home, 'backup.journal'));

  await cliJson(['keys', 'revoke', manual.id], home);
  await cliJson(['instances', 'stop', 'gpu-1'], home);
  expect(await serve.stop()).toBe(0);
  await copyFile(join(home, 'backup.json'), join(home, 'db.json'));
  await copyFile(join(home, 'backup.journal'), join(home, 'db.json.journal'));

  const again = await startServe(home);
  try {
    expect((await postChat(again.baseUrl, manual.secret, chat())).status).toBe(401);
    expect((await postChat(again.baseUrl, a.secret, chat())).status).toBe(401);
    expect((await postChat(again.baseUrl, kept.secret, chat())).status).toBe(200);
    const keys = await cliJson<{ id: string; status: string; revokeReason: string | null }[]>(['keys', 'list'], home);
    const byId = new Map(keys.map((k) => [k.id, k]));
    expect(byId.get(manual.id)).toMatchObject({ status: 'revoked', revokeReason: 'manual' });
    expect(byId.get(a.keyId)).toMatchObject({ status: 'revoked', revokeReason: 'instance_stopped' });
    expect(byId.get(kept.keyId)).toMatchObject({ status: 'active' });
    // The audit trail agrees with the statuses, and the daemon said what it corrected.
    const revocations = await cliJson<{ keyId: string }[]>(['revocations'], home);
    expect(revocations.map((r) => r.keyId).sort()).toEqual([a.keyId, manual.id].sort());
    expect(again.logs().filter((l) => String(l.msg).includes('revocation journal records its revocation')).length).toBe(
      2,
    );
  } finally {
    await again.stop();
  }
});
