/**
 * Lowdb keeps the newest audit events in db.json and moves older ones to db.json.audit.
 * A key revoked long ago (its key.revoked event archived) is still listed by `ob-proxy revocations`,
 * from its own record, stays revoked, and is not "repaired" with a new event at start.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { type ServeProcess, cliJson, startServe, tmpHome } from '../helpers/processes.js';

const servers: ServeProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
});

it('a revocation whose event went to the audit archive is still listed, and the key stays revoked', async () => {
  const home = await tmpHome();
  const usage = { requests: 0, promptTokens: 0, completionTokens: 0 };
  const at = '2026-11-01T00:00:00.000Z';
  const key = (id: string, hash: string, revoked: boolean) => ({
    id,
    name: `name-${id}`,
    instance: 'gpu-1',
    deployment: 'dep-1',
    hash: hash.repeat(64),
    hint: 'ob_sk_…abcd',
    isDefault: false,
    status: revoked ? 'revoked' : 'active',
    createdAt: at,
    lastUsedAt: null,
    revokedAt: revoked ? at : null,
    revokeReason: revoked ? 'manual' : null,
    usage,
  });
  // As a fold leaves it: events 1 to 3 archived (the old key's creation and revocation among them).
  await writeFile(
    join(home, 'db.json'),
    JSON.stringify({
      version: 2,
      through: 0,
      auditArchived: { seq: 3, at },
      instances: [
        {
          id: 'gpu-1',
          deployment: 'dep-1',
          model: 'gemma4:26b',
          endpoint: 'http://127.0.0.1:9/v1',
          state: 'ready',
          packEndsAt: null,
          upstreamTokenFile: null,
          createdAt: at,
          updatedAt: at,
        },
      ],
      // A key's record and its key.revoked event agree, as a revocation writes them together.
      keys: [
        key('archived0001', 'a', true),
        { ...key('recent000001', 'b', true), revokedAt: '2026-11-02T00:00:00.000Z', revokeReason: 'instance_stopped' },
        key('active000001', 'c', false),
      ],
      events: [
        {
          seq: 4,
          at: '2026-11-02T00:00:00.000Z',
          type: 'key.created',
          instance: 'gpu-1',
          keyId: 'recent000001',
          keyName: 'name-recent000001',
        },
        {
          seq: 5,
          at: '2026-11-02T00:00:00.000Z',
          type: 'key.revoked',
          instance: 'gpu-1',
          keyId: 'recent000001',
          keyName: 'name-recent000001',
          reason: 'instance_stopped',
        },
      ],
    }),
    { mode: 0o600 },
  );
  const serve = await startServe(home);
  servers.push(serve);
  const revs = await cliJson<unknown[]>(['revocations'], home);
  expect(revs).toEqual([
    { keyId: 'archived0001', name: 'name-archived0001', instance: 'gpu-1', revokedAt: at, reason: 'manual' },
    {
      keyId: 'recent000001',
      name: 'name-recent000001',
      instance: 'gpu-1',
      revokedAt: '2026-11-02T00:00:00.000Z',
      reason: 'instance_stopped',
    },
  ]);
  expect(await cliJson<unknown[]>(['revocations', '--instance', 'gpu-2'], home)).toEqual([]);
  const keys = await cliJson<{ id: string; status: string }[]>(['keys', 'list'], home);
  expect(keys.map((k) => [k.id, k.status]).sort()).toEqual([
    ['active000001', 'active'],
    ['archived0001', 'revoked'],
    ['recent000001', 'revoked'],
  ]);
  // No event was made up for the archived revocation, and nothing was logged as repaired.
  const client = new DaemonClient(join(home, 'ob-proxy.sock'));
  try {
    expect((await client.call<{ seq: number }[]>('GET', '/v1/audit')).map((e) => e.seq)).toEqual([4, 5]);
  } finally {
    await client.close();
  }
  expect(serve.logs().filter((l) => String(l.msg).includes('was missing from the audit trail'))).toEqual([]);
});
