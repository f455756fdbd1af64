import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hello, postChat } from '../helpers/chat.js';
import { BIN, NODE, type ServeProcess, type SimProcess, cliJson, runCli, startServe, startSimulate, tmpHome } from '../helpers/processes.js';

const MODEL = 'gemma4:26b';
let sim: SimProcess;
let serve: ServeProcess;
let home: string;
const keys: Record<string, string> = {};

interface ReadyJson { defaultKey: { secret: string } }

beforeAll(async () => {
  home = await tmpHome();
  sim = await startSimulate([MODEL]);
  serve = await startServe(home, ['--body-limit', '4096']);
  for (const id of ['live', 'pending', 'revoked', 'removed']) {
    await cliJson(['instances', 'add', id, '--model', MODEL, '--endpoint', sim.url], home);
    keys[id] = (await cliJson<ReadyJson>(['instances', 'ready', id], home)).defaultKey.secret;
  }
  await cliJson(['instances', 'pending', 'pending'], home);
  await cliJson(['instances', 'stop', 'revoked'], home);
  await cliJson(['instances', 'remove', 'removed'], home);
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

const big = JSON.stringify(hello(MODEL, { messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }));

async function code(key: string | null, body: unknown, headers: Record<string, string> = {}): Promise<string> {
  const r = await postChat(serve.baseUrl, key, body, headers);
  const e = (r.json as { error?: { code: string } } | null)?.error;
  return `${r.status} ${e?.code ?? 'ok'}`;
}

describe('CONTRACT §3 check order: the first failing check answers', () => {
  it('1. a missing key wins over everything after it', async () => {
    expect(await code(null, '{not json')).toBe('400 missing_api_key');
    expect(await code(null, big)).toBe('400 missing_api_key');
    expect(await code('', hello(MODEL), { authorization: 'Basic abc' })).toBe('400 missing_api_key');
  });

  it('2. unknown and revoked keys win over instance state and body', async () => {
    expect(await code('ob_sk_nope', big)).toBe('401 invalid_api_key');
    expect(await code(keys.revoked!, big)).toBe('401 revoked_api_key');
    expect(await code(keys.revoked!, '{not json')).toBe('401 revoked_api_key');
  });

  it('3. a removed instance answers 404 before the body is looked at', async () => {
    expect(await code(keys.removed!, big)).toBe('404 deployment_not_found');
  });

  it('4. a pending instance answers 409 before the body is looked at', async () => {
    expect(await code(keys.pending!, big)).toBe('409 deployment_not_ready');
    expect(await code(keys.pending!, { model: 'qwen3.6:27b' })).toBe('409 deployment_not_ready');
  });

  it('5. body limit, then JSON, then Content-Type and fields', async () => {
    expect(await code(keys.live!, big)).toBe('413 payload_too_large');
    expect(await code(keys.live!, '{not json', { 'content-type': 'text/plain' })).toBe('400 invalid_json');
    expect(await code(keys.live!, '[1,2]')).toBe('400 invalid_json');
    expect(await code(keys.live!, '')).toBe('400 invalid_json');
    expect(await code(keys.live!, JSON.stringify(hello(MODEL)), { 'content-type': 'text/plain' })).toBe('400 invalid_request');
    expect(await code(keys.live!, { model: 'qwen3.6:27b', messages: [] })).toBe('400 invalid_request');
  });

  it('6. model mismatch comes last', async () => {
    expect(await code(keys.live!, hello('qwen3.6:27b'))).toBe('400 model_mismatch');
    expect(await code(keys.live!, hello(MODEL))).toBe('200 ok');
  });

  it('answers 413 in the OpenAI shape', async () => {
    const r = await postChat(serve.baseUrl, keys.live!, big);
    expect(r.json).toEqual({ error: { message: expect.stringContaining('4096 bytes'), type: 'invalid_request_error', code: 'payload_too_large', param: null } });
  });

  it('GET /v1/models applies checks 1 to 3 only, whatever the instance state', async () => {
    const get = async (key: string): Promise<number> => (await fetch(`${serve.baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;
    expect(await get(keys.pending!)).toBe(200);
    expect(await get(keys.revoked!)).toBe(401);
    expect(await get(keys.removed!)).toBe(404);
    const health = await fetch(`${serve.baseUrl}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
  });

  it('answers unknown routes with the OpenAI shape and a hint about /v1', async () => {
    const r = await fetch(`${serve.baseUrl}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${keys.live!}` } });
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ error: { message: expect.stringContaining('missing /v1'), type: 'not_found_error', code: 'route_not_found', param: null } });
  });
});

describe('the management socket', () => {
  it('is mode 0600, refused to a second daemon while live, and cleaned up when stale', async () => {
    const sock = join(home, 'ob-proxy.sock');
    expect((await stat(sock)).mode & 0o777).toBe(0o600);
    const second = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(NODE, [BIN, 'serve', '--home', home, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      p.stdout.on('data', (b: Buffer) => { out += b.toString(); });
      p.stderr.on('data', (b: Buffer) => { out += b.toString(); });
      p.on('exit', (c) => resolve({ code: c, out }));
    });
    expect(second.code).toBe(1);
    // The same home: the store's lock refuses it before the socket is even looked at.
    expect(second.out).toMatch(/Another ob-proxy daemon \(pid \d+\) is already using the store/);
    // Another store, the same socket: the live socket refuses it.
    const sameSocket = await runCli(['serve', '--port', '0', '--store', join(await tmpHome(), 'db.json'), '--socket', sock]);
    expect(sameSocket.code).toBe(1);
    expect(sameSocket.stderr).toContain('Another ob-proxy daemon is already serving');

    const other = await tmpHome();
    const crashed = await startServe(other);
    crashed.proc.kill('SIGKILL');
    await crashed.exited;
    expect((await stat(join(other, 'ob-proxy.sock'))).isSocket()).toBe(true);
    const again = await startServe(other);
    expect((await runCli(['instances', 'list', '--json'], { home: other })).stdout.trim()).toBe('[]');
    await again.stop();
  });

  it('OB_PROXY_MODELS replaces the model ids the daemon accepts', async () => {
    const h = await tmpHome();
    const s = await startServe(h, [], { OB_PROXY_MODELS: 'llama3.3:70b, gemma4:26b' });
    try {
      expect(await cliJson(['instances', 'add', 'l1', '--model', 'llama3.3:70b'], h)).toMatchObject({ model: 'llama3.3:70b' });
      const refused = await runCli(['instances', 'add', 'q1', '--model', 'qwen3.6:27b'], { home: h });
      expect(refused.stderr).toContain('use one of llama3.3:70b, gemma4:26b');
    } finally {
      await s.stop();
    }
  });
});

describe('an upstream bearer token per instance', () => {
  it('is read by the daemon from a file, sent to the model server, and kept out of the store', async () => {
    const { writeFile, readFile } = await import('node:fs/promises');
    const h = await tmpHome();
    const tokenFile = join(h, 'vllm.token');
    await writeFile(tokenFile, 'upstream-secret-123\n', { mode: 0o600 });
    const s = await startServe(h);
    try {
      const missing = await runCli(['instances', 'add', 'v0', '--model', MODEL, '--endpoint', sim.url, '--upstream-token-file', join(h, 'nope')], { home: h });
      expect([missing.code, missing.stderr]).toEqual([1, expect.stringMatching(/cannot read the upstream token file .*nope \(ENOENT\)/)]);
      const added = await cliJson<Record<string, unknown>>(['instances', 'add', 'v1', '--model', MODEL, '--endpoint', sim.url, '--upstream-token-file', tokenFile], h);
      expect(added.upstreamTokenFile).toBe(tokenFile);
      const key = (await cliJson<ReadyJson>(['instances', 'ready', 'v1'], h)).defaultKey.secret;
      const r = await postChat(s.baseUrl, key, hello(MODEL, { messages: [{ role: 'user', content: 'token-check' }] }));
      expect(r.status).toBe(200);
      const got = (await sim.requests()).filter((q) => JSON.stringify(q.body).includes('token-check')).at(-1)!;
      expect(got.headers.authorization).toBe('Bearer upstream-secret-123');
      await s.stop();
      expect(await readFile(join(h, 'db.json'), 'utf8')).not.toContain('upstream-secret-123');
      expect(s.lines.join('\n')).not.toContain('upstream-secret-123');
    } finally {
      await s.stop();
    }
  });
});
