/**
 * The simulator's other routes: the Host check Ollama runs before routing, the models list,
 * `/` and `/api/version` with Gin's 404s, and the `/_sim` control routes with what it records.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buildSimulator, type Simulator, type SimulatorOptions } from '../../simulator/simulator.js';
import { chat, MODEL, rawRequest, userMessage } from './helpers.js';

let sim: Simulator | null = null;

async function start(opts: Partial<SimulatorOptions> = {}): Promise<string> {
  sim = buildSimulator({ models: [MODEL], ...opts });
  return sim.listen(0);
}

afterEach(async () => {
  await sim?.close();
  sim = null;
});

describe('host check (allowedHostsMiddleware)', () => {
  it('answers 403 with an empty body to a foreign Host, and serves local ones', async () => {
    const base = await start();
    const port = new URL(base).port;
    const post = (host: string) =>
      rawRequest(base, {
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { host, 'content-type': 'application/json' },
        body: JSON.stringify(userMessage('x')),
      });
    const denied = await post('api.example.com');
    expect(denied.status).toBe(403);
    expect(denied.body.length).toBe(0);
    expect(denied.headers['content-type']).toBeUndefined();
    for (const host of ['8.8.8.8', `example.com:${port}`, '169.254.1.1']) expect((await post(host)).status).toBe(403);
    for (const host of [
      `127.0.0.1:${port}`,
      'localhost',
      `LOCALHOST:${port}`,
      'gpu.local',
      'a.b.internal',
      'x.localhost:1',
      '10.1.2.3',
      '192.168.0.7:11434',
      '[::1]:9',
      '0.0.0.0',
    ]) {
      expect((await post(host)).status, host).toBe(200);
    }
    // it runs before routing, as a global middleware does
    expect((await rawRequest(base, { path: '/nowhere', headers: { host: 'api.example.com' } })).status).toBe(403);
    expect((await rawRequest(base, { path: '/_sim/stats', headers: { host: 'api.example.com' } })).status).toBe(200);
  });
});

describe('other routes', () => {
  it('lists models and retrieves one, or 404s', async () => {
    const base = await start({ models: [MODEL, 'qwen3.6:27b'] });
    const list = (await (await fetch(`${base}/v1/models`)).json()) as { data: { created: number }[] };
    const created = list.data[0]!.created;
    expect(list).toStrictEqual({
      object: 'list',
      data: [
        { id: MODEL, object: 'model', created, owned_by: 'library' },
        { id: 'qwen3.6:27b', object: 'model', created, owned_by: 'library' },
      ],
    });
    expect(await (await fetch(`${base}/v1/models/${encodeURIComponent(MODEL)}`)).json()).toStrictEqual({
      id: MODEL,
      object: 'model',
      created,
      owned_by: 'library',
    });
    const missing = await fetch(`${base}/v1/models/llama3:8b`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toStrictEqual({
      error: { message: "model 'llama3:8b' not found", type: 'not_found_error', param: null, code: null },
    });
  });

  it('lists data: null when no models', async () => {
    const base = await start({ models: [] });
    expect(await (await fetch(`${base}/v1/models`)).json()).toStrictEqual({ object: 'list', data: null });
  });

  it('serves /, /api/version, and Gin 404s for anything else', async () => {
    const base = await start();
    const root = await fetch(`${base}/`);
    expect(root.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await root.text()).toBe('Ollama is running');
    expect(await (await fetch(`${base}/api/version`)).json()).toStrictEqual({ version: '0.33.0-sim' });
    for (const [method, path] of [
      ['GET', '/chat/completions'],
      ['GET', '/v1/chat/completions'],
      ['POST', '/v1/models'],
    ]) {
      const res = await fetch(`${base}${path}`, { method });
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toBe('text/plain');
      expect(await res.text()).toBe('404 page not found');
    }
  });
});

describe('control routes and recording', () => {
  it('exposes requests, stats and config over HTTP', async () => {
    const base = await start();
    await (await chat(base, userMessage('a'))).text();
    await sim!.waitFor((r) => r.completed);
    const list = (await (await fetch(`${base}/_sim/requests`)).json()) as { seq: number; body: unknown }[];
    expect(list.map((r) => r.seq)).toStrictEqual([1]);
    expect(list[0]!.body).toStrictEqual(userMessage('a'));
    expect(await (await fetch(`${base}/_sim/stats`)).json()).toStrictEqual({
      received: 1,
      inFlight: 0,
      aborted: 0,
      completed: 1,
    });
    expect(await (await fetch(`${base}/_sim/requests`, { method: 'DELETE' })).json()).toStrictEqual({ cleared: 1 });
    expect(sim!.requests).toStrictEqual([]);

    const cfg = await fetch(`${base}/_sim/config`, {
      method: 'POST',
      body: JSON.stringify({ chunks: 1, fail: 'html-500' }),
    });
    expect(cfg.status).toBe(200);
    expect(await cfg.json()).toMatchObject({ models: [MODEL], chunks: 1, fail: 'html-500' });
    expect((await chat(base, userMessage('b'))).status).toBe(500);
    const bad = await fetch(`${base}/_sim/config`, { method: 'POST', body: JSON.stringify({ fail: 'explode' }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain('fail');
    expect(() => sim!.configure({ chunks: -1 })).toThrow(/chunks/);
    sim!.configure({ fail: 'none' });
    expect((await chat(base, userMessage('c'))).status).toBe(200);
    expect(sim!.requests.map((r) => r.seq)).toStrictEqual([2, 3]);
  });

  it('keeps only the last recordLimit requests, oldest first', async () => {
    const base = await start({ recordLimit: 3 });
    for (let i = 0; i < 5; i++) await (await fetch(`${base}/`)).text();
    await sim!.waitFor((r) => r.seq === 5 && r.completed);
    expect(sim!.requests.map((r) => r.seq)).toStrictEqual([3, 4, 5]);
    sim!.configure({ recordLimit: 2 });
    expect(sim!.requests.map((r) => r.seq)).toStrictEqual([4, 5]);
    expect(sim!.stats.received).toBe(5);
  });

  it('waitFor rejects on timeout', async () => {
    await start();
    await expect(sim!.waitFor((r) => r.aborted, 50)).rejects.toThrow(/waitFor/);
  });
});
