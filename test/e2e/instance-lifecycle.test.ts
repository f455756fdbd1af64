/**
 * An instance's life through the CLI: a pack extension that would shorten it, an id removed and
 * added again. One describe per defect found, its story above it.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hello, postChat } from '../helpers/chat.js';
import {
  cliJson,
  runCli,
  type ServeProcess,
  type SimProcess,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { serveWithSimulator } from '../helpers/serve-fixture.js';
import { chat, MODEL } from '../helpers/store-home.js';

/**
 * Regression: `ob-proxy instances extend gpu-1 --pack-ends +8h` on a pack with 30 days left
 * (a duration counts from now, not from the current end: an easy slip) moved the end 29 days
 * earlier, answered "its keys keep working", and 8 hours later the daemon stopped the instance and
 * revoked every key of it for ever. Now `extend` refuses an end sooner than the current one,
 * exit 1 with nothing changed, naming the current end; `--shorten` does it on purpose.
 */
describe('extend never moves a pack end sooner', () => {
  interface InstanceJson {
    packEndsAt: string;
    state: string;
    activeKeys: number;
  }

  const f = serveWithSimulator();

  it('refuses an "extension" that ends the pack sooner; --shorten does it on purpose', async () => {
    const { sim, serve, home } = f;
    const added = await cliJson<InstanceJson>(
      ['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url, '--pack-ends', '+30d'],
      home,
    );
    const ready = await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', 'gpu-1'], home);
    const paid = added.packEndsAt;

    const slip = await runCli(['instances', 'extend', 'gpu-1', '--pack-ends', '+8h'], { home });
    expect(slip.code).toBe(1);
    expect(slip.stdout).toBe('');
    const sooner = /; (\S+) is sooner/.exec(slip.stderr)?.[1] ?? '';
    expect(Date.parse(sooner)).toBeLessThan(Date.parse(paid));
    expect(slip.stderr).toBe(
      `error: The pack of "gpu-1" already ends at ${paid}; ${sooner} is sooner, and every key of it would be revoked then. ` +
        `A duration such as +30d counts from now: give a time after ${paid}, or add --shorten to end the pack sooner on purpose.\n`,
    );
    const jsonSlip = await runCli(['instances', 'extend', 'gpu-1', '--pack-ends', '+8h', '--json'], { home });
    expect([jsonSlip.code, jsonSlip.stdout]).toEqual([1, '']);

    // Nothing changed: the pack, the keys, the audit trail.
    expect(await cliJson<InstanceJson>(['instances', 'show', 'gpu-1'], home)).toMatchObject({
      packEndsAt: paid,
      state: 'ready',
      activeKeys: 1,
    });
    expect((await postChat(serve.baseUrl, ready.defaultKey.secret, chat())).status).toBe(200);
    const audit = serve.logs().filter((l) => l.audit === 'instance.extended');
    expect(audit).toEqual([]);

    // Later is an extension, as before.
    const later = await cliJson<InstanceJson>(['instances', 'extend', 'gpu-1', '--pack-ends', '+40d'], home);
    expect(Date.parse(later.packEndsAt)).toBeGreaterThan(Date.parse(paid));

    // Sooner on purpose.
    const shortened = await cliJson<InstanceJson>(
      ['instances', 'extend', 'gpu-1', '--pack-ends', '+8h', '--shorten'],
      home,
    );
    expect(Date.parse(shortened.packEndsAt)).toBeLessThan(Date.parse(paid));
    expect(shortened).toMatchObject({ state: 'ready', activeKeys: 1 });
  });
});

/**
 * Regression: `instances remove X` left X's keys active, and `instances add X` with
 * another model and endpoint (a new rental) then served the old renter's key, while the new owner
 * got no default key (`"defaultKey": null`). Now remove revokes every key (instance_removed), a
 * key belongs to the deployment it was made for (an internal id never reused), and the old keys
 * answer 404 deployment_not_found for ever, across restarts.
 */
describe("a removed instance's keys stay dead when its id is added again", () => {
  interface ReadyJson {
    defaultKey: { id: string; secret: string } | null;
  }
  interface Revocation {
    keyId: string;
    reason: string;
    instance: string;
  }

  const servers: (ServeProcess | SimProcess)[] = [];
  afterEach(async () => {
    for (const p of servers.splice(0)) await p.stop();
  });

  const codeOf = async (base: string, key: string, model: string): Promise<string> => {
    const r = await postChat(base, key, hello(model));
    return `${r.status} ${(r.json as { error?: { code: string } }).error?.code ?? 'ok'}`;
  };

  it("the old renter's keys answer 404 after remove, and after the id is added again for someone else", async () => {
    const home = await tmpHome();
    const simA = await startSimulate(['gemma4:26b']);
    const simB = await startSimulate(['qwen3.6:27b']);
    let serve = await startServe(home);
    servers.push(simA, simB, serve);

    await cliJson(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', simA.url], home);
    const old = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-1'], home)).defaultKey!;
    const named = await cliJson<{ id: string; secret: string }>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'notebook'],
      home,
    );
    expect(await codeOf(serve.baseUrl, old.secret, 'gemma4:26b')).toBe('200 ok');

    const removed = await cliJson<{ removed: boolean; activeKeys: number }>(['instances', 'remove', 'gpu-1'], home);
    expect(removed.removed).toBe(true);
    expect(await codeOf(serve.baseUrl, old.secret, 'gemma4:26b')).toBe('404 deployment_not_found');
    expect(await codeOf(serve.baseUrl, named.secret, 'gemma4:26b')).toBe('404 deployment_not_found');
    const revs = await cliJson<Revocation[]>(['revocations', '--instance', 'gpu-1'], home);
    expect(revs.map((r) => [r.keyId, r.reason]).sort()).toEqual(
      [
        [old.id, 'instance_removed'],
        [named.id, 'instance_removed'],
      ].sort(),
    );

    // A new rental under the same id: another model, another server, its own default key.
    await cliJson(['instances', 'add', 'gpu-1', '--model', 'qwen3.6:27b', '--endpoint', simB.url], home);
    const fresh = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-1'], home)).defaultKey;
    expect(fresh).not.toBeNull();
    expect(await codeOf(serve.baseUrl, fresh!.secret, 'qwen3.6:27b')).toBe('200 ok');
    for (const k of [old.secret, named.secret]) {
      expect(await codeOf(serve.baseUrl, k, 'qwen3.6:27b')).toBe('404 deployment_not_found');
      expect(await codeOf(serve.baseUrl, k, 'gemma4:26b')).toBe('404 deployment_not_found');
    }
    const keys = await cliJson<{ id: string; status: string }[]>(['keys', 'list', '--instance', 'gpu-1'], home);
    expect(keys.map((k) => [k.id, k.status]).sort()).toEqual(
      [
        [old.id, 'revoked'],
        [named.id, 'revoked'],
        [fresh!.id, 'active'],
      ].sort(),
    );

    // And after a restart.
    await serve.stop();
    serve = await startServe(home);
    servers.push(serve);
    expect(await codeOf(serve.baseUrl, old.secret, 'qwen3.6:27b')).toBe('404 deployment_not_found');
    expect(await codeOf(serve.baseUrl, fresh!.secret, 'qwen3.6:27b')).toBe('200 ok');
    // Only the first request after ready, and none after the removal, reached the old server.
    expect((await simA.requests()).filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);
  });

  it("a version 1 store, where an id was removed and added again, is upgraded: the earlier deployment's keys are revoked and answer 404", async () => {
    const home = await tmpHome();
    const sim = await startSimulate(['qwen3.6:27b']);
    servers.push(sim);
    // Written as version 1 did: no deployment ids. "old" was made before gpu-1 was added again.
    const usage = { requests: 0, promptTokens: 0, completionTokens: 0 };
    const key = (id: string, createdAt: string, hash: string) => ({
      id,
      name: id,
      instance: 'gpu-1',
      hash: hash.repeat(64),
      hint: 'ob_sk_…abcd',
      isDefault: false,
      status: 'active',
      createdAt,
      lastUsedAt: null,
      revokedAt: null,
      revokeReason: null,
      usage,
    });
    await writeFile(
      join(home, 'db.json'),
      JSON.stringify({
        version: 1,
        instances: [
          {
            id: 'gpu-1',
            model: 'qwen3.6:27b',
            endpoint: sim.url,
            state: 'ready',
            packEndsAt: null,
            createdAt: '2026-11-02T00:00:00.000Z',
            updatedAt: '2026-11-02T00:00:00.000Z',
          },
        ],
        keys: [
          key('oldkey000001', '2026-11-01T00:00:00.000Z', 'a'),
          key('newkey000001', '2026-11-03T00:00:00.000Z', 'b'),
        ],
        events: [
          {
            seq: 1,
            at: '2026-11-01T00:00:00.000Z',
            type: 'key.created',
            instance: 'gpu-1',
            keyId: 'oldkey000001',
            keyName: 'oldkey000001',
          },
        ],
      }),
      { mode: 0o600 },
    );
    const serve = await startServe(home);
    servers.push(serve);
    const keys = await cliJson<{ id: string; status: string; revokeReason: string | null }[]>(['keys', 'list'], home);
    expect(keys.map((k) => [k.id, k.status, k.revokeReason]).sort()).toEqual([
      ['newkey000001', 'active', null],
      ['oldkey000001', 'revoked', 'instance_removed'],
    ]);
    const revs = await cliJson<Revocation[]>(['revocations'], home);
    expect(revs).toEqual([
      {
        keyId: 'oldkey000001',
        name: 'oldkey000001',
        instance: 'gpu-1',
        revokedAt: expect.any(String),
        reason: 'instance_removed',
      },
    ]);
  });
});
