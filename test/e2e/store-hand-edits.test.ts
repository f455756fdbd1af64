/**
 * A lowdb store edited by hand: records validated, revoked keys stay revoked. One describe per
 * defect found, its story above it.
 */
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postChat } from '../helpers/chat.js';
import { cliJson, runCli, type SimProcess, startServe, startSimulate, tmpHome } from '../helpers/processes.js';
import { chat, readStore, readyInstance, writeStore } from '../helpers/store-home.js';

/**
 * Regression (Hand edits): a revoked key set back to `active` in db.json was
 * accepted, although its `key.revoked` event was in the audit trail of the same file. Now a key
 * is revoked whenever anything records its revocation (the audit trail, the revocation journal,
 * its own revokedAt/revokeReason): revoked wins, and the log says which key was corrected.
 */
describe("a key's recorded revocation wins over a hand edit", () => {
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
});

/**
 * Regression (Hand edits): records were used as found. `instances:[null]` stopped
 * the daemon with a bare TypeError, and `packEndsAt:"garbage"` was accepted: the pack timer
 * re-armed every millisecond (Date.parse gives NaN) and the pack never ended. Now every record is
 * checked on load: `serve` refuses to start, naming the record and the field and saying how to
 * fix it, and leaves the file as it was. (Every field: test/unit/store-validation.test.ts.)
 */
describe('every store record is checked on load', () => {
  const instance = {
    id: 'gpu-1',
    deployment: 'd-1',
    model: 'gemma4:26b',
    endpoint: 'http://127.0.0.1:9',
    state: 'ready',
    packEndsAt: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  };

  async function serveOn(data: unknown): Promise<{ code: number; stderr: string; before: string; after: string }> {
    const home = await tmpHome();
    await writeStore(home, data);
    const before = await readFile(join(home, 'db.json'), 'utf8');
    const r = await runCli(['serve', '--port', '0'], { home });
    return { code: r.code, stderr: r.stderr, before, after: await readFile(join(home, 'db.json'), 'utf8') };
  }

  it('instances:[null] is refused naming the record, not a bare TypeError', async () => {
    const r = await serveOn({ version: 2, instances: [null], keys: [], events: [] });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /has a record ob-proxy cannot use: instances\[0\]: expected an object, found null\. The file was left untouched\. Fix that record by hand/,
    );
    expect(r.stderr).not.toContain('TypeError');
    expect(r.after).toBe(r.before);
  });

  it('a packEndsAt that is not a time is refused naming the instance and the field, not a busy pack timer', async () => {
    const r = await serveOn({ version: 2, instances: [{ ...instance, packEndsAt: 'garbage' }], keys: [], events: [] });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('instances[0] (id "gpu-1"), field "packEndsAt": expected an ISO 8601 time with a zone');
    expect(r.after).toBe(r.before);
  });

  it('a key record with an unknown status is refused naming the key and the field', async () => {
    const key = {
      id: 'AAAAAAAAAAAA',
      name: 'k',
      instance: 'gpu-1',
      deployment: 'd-1',
      hash: 'a'.repeat(64),
      hint: 'ob_sk_…AAAA',
      isDefault: false,
      status: 'enabled',
      createdAt: '2026-01-01T00:00:00.000Z',
      lastUsedAt: null,
      revokedAt: null,
      revokeReason: null,
      usage: { requests: 0, promptTokens: 0, completionTokens: 0 },
    };
    const r = await serveOn({ version: 2, instances: [instance], keys: [key], events: [] });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'keys[0] (id "AAAAAAAAAAAA"), field "status": expected one of active, revoked, found "enabled"',
    );
    expect(r.after).toBe(r.before);
  });
});
