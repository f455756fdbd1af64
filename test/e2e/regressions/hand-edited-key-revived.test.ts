/**
 * Regression (Hand edits): a revoked key set back to `active` in db.json was
 * accepted, although its `key.revoked` event was in the audit trail of the same file. Now a key
 * is revoked whenever anything records its revocation (the audit trail, the revocation journal,
 * its own revokedAt/revokeReason): revoked wins, and the log says which key was corrected.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postChat } from '../../helpers/chat.js';
import { type SimProcess, cliJson, startServe, startSimulate, tmpHome } from '../../helpers/processes.js';
import { chat, readStore, readyInstance, writeStore } from '../../helpers/store-home.js';

let sim: SimProcess;
beforeAll(async () => {
  sim = await startSimulate(['gemma4:26b']);
});
afterAll(() => sim.stop());

/** A home with one revoked key, the daemon stopped; `edit` then changes db.json by hand. */
async function revokedThenEdited(
  edit: (home: string, keyId: string) => Promise<void>,
): Promise<{ home: string; secret: string; keyId: string }> {
  const home = await tmpHome();
  const serve = await startServe(home);
  const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);
  await cliJson(['keys', 'revoke', keyId], home);
  expect(await serve.stop()).toBe(0);
  await edit(home, keyId);
  return { home, secret, keyId };
}

async function reactivate(home: string, keyId: string, dropEvent: boolean): Promise<void> {
  const db = await readStore(home);
  const key = db.keys.find((k) => k.id === keyId)!;
  Object.assign(key, { status: 'active', revokedAt: null, revokeReason: null });
  if (dropEvent) db.events = db.events.filter((e) => !(e.type === 'key.revoked' && e.keyId === keyId));
  await writeStore(home, db);
}

async function expectRevoked(home: string, keyId: string, secret: string, source: string): Promise<void> {
  const serve = await startServe(home);
  try {
    expect((await postChat(serve.baseUrl, secret, chat())).status).toBe(401);
    const keys = await cliJson<{ id: string; status: string; revokeReason: string }[]>(['keys', 'list'], home);
    expect(keys.find((k) => k.id === keyId)).toMatchObject({ status: 'revoked', revokeReason: 'manual' });
    expect(serve.logs().some((l) => String(l.msg).includes(`Key ${keyId}`) && String(l.msg).includes(source))).toBe(
      true,
    );
  } finally {
    await serve.stop();
  }
}

it('a key set back to active although the audit trail holds its key.revoked event stays revoked', async () => {
  // The journal removed too: the audit trail alone must be enough.
  const { home, keyId, secret } = await revokedThenEdited(async (h, id) => {
    await reactivate(h, id, false);
    await rm(join(h, 'db.json.revocations'));
  });
  await expectRevoked(home, keyId, secret, 'the audit trail');
});

it('a key set back to active with its audit event deleted too stays revoked (the journal)', async () => {
  const { home, keyId, secret } = await revokedThenEdited(async (h, id) => reactivate(h, id, true));
  await expectRevoked(home, keyId, secret, 'the revocation journal');
});
