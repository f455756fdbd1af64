/**
 * The key lifecycle through the real binary, over the real socket, against a real daemon and
 * simulator: the whole path once, the pack timer, a restart, and an unreachable daemon. Each
 * command's outputs, pending and --no-wait are in test/inproc/cli-commands.test.ts, exit codes and
 * refusals in test/inproc/cli-errors.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hello, postChat } from '../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  eventually,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';

const MODEL = 'qwen3.6:27b';
const SECRET = /ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/g;

interface KeyJson {
  id: string;
  name: string;
  instance: string;
  status: string;
  hint: string;
  isDefault: boolean;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  revokeReason: string | null;
  secret?: string;
}
interface ReadyJson {
  id: string;
  state: string;
  activeKeys: number;
  defaultKey: { id: string; name: string; secret: string } | null;
}
interface Revocation {
  keyId: string;
  name: string;
  instance: string;
  revokedAt: string;
  reason: string;
}

let serve: ServeProcess | undefined;
let sim: SimProcess | undefined;
afterEach(async () => {
  await serve?.stop();
  await sim?.stop();
  serve = undefined;
  sim = undefined;
});

async function works(baseUrl: string, key: string): Promise<number> {
  return (await postChat(baseUrl, key, hello(MODEL))).status;
}

async function codeOf(baseUrl: string, key: string): Promise<[number, string]> {
  const r = await postChat(baseUrl, key, hello(MODEL));
  return [r.status, (r.json as { error?: { code: string } }).error?.code ?? 'ok'];
}

describe('key lifecycle through the real CLI against the real daemon', () => {
  it('add → ready → create → extend → stop → ready again → revocations; secrets shown once, stored nowhere', async () => {
    const home = await tmpHome();
    sim = await startSimulate([MODEL]);
    serve = await startServe(home);
    const base = serve.baseUrl;
    const outputs: string[] = [];
    const cli = async <T>(args: string[]): Promise<T> => {
      const r = await runCli([...args, '--json'], { home });
      outputs.push(r.stdout, r.stderr);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as T;
    };

    const added = await cli<Record<string, unknown>>([
      'instances',
      'add',
      'gpu-1',
      '--model',
      MODEL,
      '--endpoint',
      `${sim.url}/v1`,
      '--pack-ends',
      '2099-01-01T00:00:00Z',
    ]);
    expect(added).toEqual({
      id: 'gpu-1',
      model: MODEL,
      aliases: [],
      endpoint: sim.url,
      state: 'pending',
      packEndsAt: '2099-01-01T00:00:00.000Z',
      upstreamTokenFile: null,
      activeKeys: 0,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      health: null,
    });

    const ready = await cli<ReadyJson>(['instances', 'ready', 'gpu-1']);
    expect(ready.state).toBe('ready');
    expect(ready.activeKeys).toBe(1);
    expect(ready.defaultKey).toEqual({
      id: expect.any(String),
      name: 'default',
      secret: expect.stringMatching(/^ob_sk_/),
    });
    const k0 = ready.defaultKey!.secret;
    expect(await works(base, k0)).toBe(200);

    // Shown once: the secret is in no later output, and cannot be revealed again.
    const reveal = await runCli(['keys', 'reveal', ready.defaultKey!.id], { home });
    expect(reveal.code).toBe(1);
    expect(reveal.stdout).toBe('');
    expect(reveal.stderr).toMatch(/^error: .*cannot be shown.*\n$/);

    const k1 = await cli<KeyJson>(['keys', 'create', '--instance', 'gpu-1', '--name', 'ci-bot']);
    const k2 = await cli<KeyJson>(['keys', 'create', '--instance', 'gpu-1', '--name', 'notebook']);
    expect(k1).toMatchObject({
      name: 'ci-bot',
      instance: 'gpu-1',
      status: 'active',
      isDefault: false,
      hint: `ob_sk_…${k1.secret!.slice(-4)}`,
    });
    const secrets = [k0, k1.secret!, k2.secret!];
    for (const s of secrets) expect(await works(base, s)).toBe(200);

    const extended = await cli<Record<string, unknown>>([
      'instances',
      'extend',
      'gpu-1',
      '--pack-ends',
      '2099-06-01T00:00:00Z',
    ]);
    expect(extended).toMatchObject({
      id: 'gpu-1',
      state: 'ready',
      packEndsAt: '2099-06-01T00:00:00.000Z',
      activeKeys: 3,
    });
    for (const s of secrets) expect(await works(base, s)).toBe(200);

    const stopped = await cli<Record<string, unknown>>(['instances', 'stop', 'gpu-1']);
    expect(stopped).toMatchObject({ state: 'stopped', activeKeys: 0 });
    // At once: the command returned, so every key is already refused.
    for (const s of secrets) expect(await codeOf(base, s)).toEqual([401, 'revoked_api_key']);

    const again = await cli<ReadyJson>(['instances', 'ready', 'gpu-1']);
    expect(again.defaultKey).not.toBeNull();
    const k3 = again.defaultKey!.secret;
    expect(secrets).not.toContain(k3);
    expect(await works(base, k3)).toBe(200);
    for (const s of secrets) expect(await codeOf(base, s)).toEqual([401, 'revoked_api_key']);

    const revs = await cli<Revocation[]>(['revocations']);
    expect(revs.map((r) => [r.name, r.instance, r.reason])).toEqual([
      ['default', 'gpu-1', 'instance_stopped'],
      ['ci-bot', 'gpu-1', 'instance_stopped'],
      ['notebook', 'gpu-1', 'instance_stopped'],
    ]);

    const manual = await cli<KeyJson>(['keys', 'revoke', k1.id]).catch(() => null);
    expect(manual).toBeNull(); // already revoked: refused

    const keys = await cli<KeyJson[]>(['keys', 'list', '--instance', 'gpu-1']);
    expect(keys).toHaveLength(4);
    expect(keys.filter((k) => k.status === 'active').map((k) => k.name)).toEqual(['default']);
    expect(keys.every((k) => !('secret' in k) && !('hash' in k))).toBe(true);

    // Human output too: tables never show a secret.
    const human = await runCli(['keys', 'list'], { home });
    expect(human.stdout).toContain('ci-bot');
    outputs.push(human.stdout);

    // Secrets: each appears in exactly the one output that displayed it; never in the store or logs.
    const all = [k0, k1.secret!, k2.secret!, k3];
    for (const s of all) expect(outputs.filter((o) => o.includes(s))).toHaveLength(1);
    await serve.stop();
    const db = await readFile(join(home, 'db.json'), 'utf8');
    expect(db.match(SECRET)).toBeNull();
    for (const s of all) expect(db).not.toContain(s.slice(6));
    expect(serve.lines.join('\n').match(SECRET)).toBeNull();
  });

  it('a pack that ends with no command stops the instance and revokes its keys with pack_ended', async () => {
    const home = await tmpHome();
    sim = await startSimulate([MODEL]);
    serve = await startServe(home);
    await cliJson(
      ['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url, '--pack-ends', '2099-01-01T00:00:00Z'],
      home,
    );
    const k = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-1'], home)).defaultKey!.secret;
    await cliJson(['keys', 'create', '--instance', 'gpu-1', '--name', 'second'], home);
    // Set up first, then bring the end close: a busy machine cannot make the pack end mid-setup.
    await cliJson(
      ['instances', 'extend', 'gpu-1', '--pack-ends', new Date(Date.now() + 2000).toISOString(), '--shorten'],
      home,
    );
    const revs = await eventually(
      async () => {
        const r = await cliJson<Revocation[]>(['revocations', '--instance', 'gpu-1'], home);
        return r.length === 2 ? r : undefined;
      },
      'pack end revocations',
      10_000,
    );
    expect(revs.map((r) => r.reason)).toEqual(['pack_ended', 'pack_ended']);
    expect((await cliJson<Record<string, unknown>>(['instances', 'show', 'gpu-1'], home)).state).toBe('stopped');
    expect(await codeOf(serve.baseUrl, k)).toEqual([401, 'revoked_api_key']);
  });

  it('a daemon restart keeps instances, working keys and revocations', async () => {
    const home = await tmpHome();
    sim = await startSimulate([MODEL]);
    serve = await startServe(home);
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
    const live = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-1'], home)).defaultKey!.secret;
    const gone = await cliJson<KeyJson>(['keys', 'create', '--instance', 'gpu-1', '--name', 'gone'], home);
    await cliJson(['keys', 'revoke', gone.id], home);
    expect(await works(serve.baseUrl, live)).toBe(200);
    expect(await serve.stop()).toBe(0);

    serve = await startServe(home);
    expect(await works(serve.baseUrl, live)).toBe(200);
    expect(await codeOf(serve.baseUrl, gone.secret!)).toEqual([401, 'revoked_api_key']);
    const insts = await cliJson<Array<Record<string, unknown>>>(['instances', 'list'], home);
    expect(insts).toEqual([expect.objectContaining({ id: 'gpu-1', state: 'ready', activeKeys: 1 })]);
    const revs = await cliJson<Revocation[]>(['revocations'], home);
    expect(revs).toEqual([
      { keyId: gone.id, name: 'gone', instance: 'gpu-1', revokedAt: expect.any(String), reason: 'manual' },
    ]);
    // Usage counted in memory was flushed at shutdown and survived the restart.
    const keys = await cliJson<Array<KeyJson & { usage: { requests: number } }>>(['keys', 'list'], home);
    expect(keys.find((k) => k.isDefault)!.usage.requests).toBe(2); // one before the restart (flushed at shutdown), one after
  });
});

describe('CLI conventions', () => {
  // Exit 2, exit 1 and help: test/inproc/cli-errors.test.ts; the in-process CLI's outputs:
  // test/inproc/cli-commands.test.ts.
  it('exit 3 with a hint when no daemon listens on the socket; one line on stderr', async () => {
    const home = await tmpHome();
    const down = await runCli(['instances', 'list', '--json'], { home });
    expect(down.code).toBe(3);
    expect(down.stdout).toBe('');
    expect(down.stderr).toMatch(/^error: Cannot reach the ob-proxy daemon .*ob-proxy serve.*\n$/);
  });
});
