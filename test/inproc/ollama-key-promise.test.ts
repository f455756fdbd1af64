/**
 * The key's promise on Ollama's own API (docs/contract.md §6, docs/compatibility.md): on
 * `/api/chat`, `/api/generate` and `/api/embed`, the check order and codes in Ollama's error
 * shape with nothing sent; a revocation mid-stream ending the NDJSON stream with one error line
 * and aborting the upstream; a client that leaves cancelling the upstream; the model server's
 * refusals, error lines and broken streams; an endless line bounded; limits counting native
 * requests (rpm, and the tpm reserve read from `options.num_predict`); what no key may use (403)
 * and what is not there (404), in Ollama's shape.
 */
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Answer, type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
/** An upstream whose /api/chat answer is one line that never ends, or a line that is not JSON. */
let hostile: Server;
let hostileClosed = 0;
const keys: Record<string, string> = {};

async function post(path: string, key: string | null, payload: unknown, type = 'application/json'): Promise<Answer> {
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: path,
    headers: { 'content-type': type, ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
  let json: unknown = null;
  try {
    json = JSON.parse(res.body);
  } catch {
    // a stream
  }
  return { status: res.statusCode, headers: res.headers, json, text: res.body };
}

const lines = (text: string): Record<string, unknown>[] =>
  text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function readyInstance(id: string, endpoint = simUrl, model = MODEL): Promise<string> {
  expect((await d.manage('POST', '/v1/instances', { id, model, endpoint })).status).toBe(201);
  const ready = await d.manage('POST', `/v1/instances/${id}/ready`, { probe: false });
  return (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
}

const keyId = async (instance: string): Promise<string> =>
  ((await d.manage('GET', `/v1/keys?instance=${instance}`)).json as { id: string }[])[0]!.id;

beforeAll(async () => {
  d = await buildInproc({ maxFrameBytes: 16 * 1024 });
  ({ sim, url: simUrl } = await startSim({ models: [MODEL, 'qwen3.6:27b'], chunks: 3 }));
  hostile = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      if (req.url === '/api/chat') res.write(`{"model":"${MODEL}","message":{"content":"${'x'.repeat(32 * 1024)}`);
      else res.end('{"model":"m","done":false}\nnot json\n');
    });
    res.on('close', () => hostileClosed++);
  });
  await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', r));
  for (const id of ['live', 'revoked', 'removed', 'mid', 'left', 'rpm', 'tpm', 'later'])
    keys[id] = await readyInstance(id);
  keys.other = await readyInstance('other', simUrl, 'qwen3.6:27b');
  keys.hostile = await readyInstance('hostile', `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`);
  expect((await d.manage('POST', '/v1/instances', { id: 'pending', model: MODEL, endpoint: simUrl })).status).toBe(201);
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  await d.manage('POST', '/v1/instances/later/pending', {});
  await d.manage('DELETE', '/v1/instances/removed');
  await d.manage('POST', `/v1/keys/${await keyId('rpm')}/limits`, { rpm: 1 });
  await d.manage('POST', `/v1/keys/${await keyId('tpm')}/limits`, { tpm: 200 });
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
  hostile?.closeAllConnections();
  await new Promise((r) => hostile?.close(r));
});

beforeEach(async () => {
  await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
});

const ROUTES = [
  { path: '/api/chat', body: (model: string) => ({ model, messages: [{ role: 'user', content: 'Say hi' }] }) },
  { path: '/api/generate', body: (model: string) => ({ model, prompt: 'Say hi' }) },
  { path: '/api/embed', body: (model: string) => ({ model, input: 'Say hi' }) },
];

describe.each(ROUTES)('$path', (route) => {
  it('refused in the check order, in Ollama’s shape with our code, and nothing sent', async () => {
    const body = JSON.stringify(route.body(MODEL));
    const cases: [string, string | null, string, number, string, string][] = [
      ['no key', null, body, 400, 'missing_api_key', 'No API key'],
      ['unknown key', 'ob_sk_nope', body, 401, 'invalid_api_key', 'The API key is not valid.'],
      ['revoked key', keys.revoked!, body, 401, 'revoked_api_key', 'This API key has been revoked'],
      ['removed deployment', keys.removed!, body, 404, 'deployment_not_found', 'No deployment exists'],
      ['another model', keys.other!, body, 400, 'model_mismatch', 'This API key is bound to a deployment of'],
      ['a duplicate key', keys.live!, body.replace('{', '{"model":"x",'), 400, 'invalid_json', 'The request body'],
      ['a case-variant key', keys.live!, body.replace('{', '{"MODEL":"x",'), 400, 'invalid_json', '"MODEL" differs'],
      ['not JSON', keys.live!, '{"model":', 400, 'invalid_json', 'The request body is not valid JSON'],
    ];
    for (const [what, key, payload, status, code, start] of cases) {
      const r = await post(route.path, key, payload);
      const json = r.json as { error: string; code: string };
      expect({
        what,
        status: r.status,
        keys: Object.keys(json),
        code: json.code,
        retry: r.headers['x-should-retry'],
      }).toEqual({
        what,
        status,
        keys: ['error', 'code'],
        code,
        retry: 'false',
      });
      expect(json.error.startsWith(start), `${what}: ${json.error}`).toBe(true);
    }
    expect(sim.requests.filter((q) => q.method === 'POST')).toEqual([]);
  });

  it('a body sent as form data, as `curl -d` sends it, is read as JSON, as Ollama reads it', async () => {
    const r = await post(
      route.path,
      keys.live!,
      { ...route.body(MODEL), stream: false },
      'application/x-www-form-urlencoded',
    );
    expect(r.status).toBe(200);
    expect(sim.requests.filter((q) => q.path === route.path)).toHaveLength(1);
  });
});

describe('streams', () => {
  it('a revocation mid-stream ends it with one error line in Ollama’s shape, and aborts the upstream', async () => {
    const pending = post('/api/chat', keys.mid!, {
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hello [[sim tokensPerSecond=20 chunks=200]]' }],
    });
    await sim.waitFor((q) => q.path === '/api/chat' && q.chunksSent >= 4);
    expect((await d.manage('POST', `/v1/keys/${await keyId('mid')}/revoke`, {})).status).toBe(200);
    const r = await pending;
    expect([r.status, r.headers['content-type']]).toEqual([200, 'application/x-ndjson']);
    const all = lines(r.text);
    expect(all.length).toBeGreaterThanOrEqual(4);
    expect(all.slice(0, -1).every((l) => l.done === false)).toBe(true);
    expect(all.at(-1)).toEqual({
      error:
        'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
      code: 'revoked_api_key',
    });
    const upstream = await sim.waitFor((q) => q.path === '/api/chat' && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it('a client that leaves mid-stream cancels the upstream', async () => {
    await d.daemon.listen();
    const ac = new AbortController();
    const res = await fetch(`${d.daemon.ctx.baseUrl}/api/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.left!}` },
      body: JSON.stringify({ model: MODEL, prompt: 'Count [[sim tokensPerSecond=20 chunks=200]]' }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    const upstream = await sim.waitFor((q) => q.path === '/api/generate' && q.endedAt !== null);
    expect([upstream.aborted, upstream.chunksSent < 200]).toEqual([true, true]);
  });

  it('the model server’s own error line is passed on, its last; a stream cut short ends with ours', async () => {
    const ask = (directive: string) =>
      post('/api/chat', keys.live!, { model: MODEL, messages: [{ role: 'user', content: `x ${directive}` }] });
    const failed = lines((await ask('[[sim fail=error-event failAfterChunks=2]]')).text);
    expect(failed).toHaveLength(3);
    expect(failed[2]).toEqual({ error: expect.stringContaining('model runner has unexpectedly stopped') });
    const cut = lines((await ask('[[sim fail=eof-mid-stream failAfterChunks=2]]')).text);
    expect(cut.slice(2)).toEqual([
      { error: 'The model server ended the stream before it was complete.', code: 'upstream_unavailable' },
    ]);
  });

  it('a bare load answer (no messages) streams as one line, newline added', async () => {
    const r = await post('/api/chat', keys.live!, { model: MODEL, messages: [] });
    expect([r.status, r.headers['content-type']]).toEqual([200, 'application/x-ndjson']);
    expect(r.text.endsWith('"done_reason":"load"}\n')).toBe(true);
    expect(lines(r.text)).toHaveLength(1);
  });

  it('a line that never ends, or one that is not JSON, ends the stream with our error and aborts the upstream', async () => {
    const before = hostileClosed;
    const endless = await post('/api/chat', keys.hostile!, {
      model: MODEL,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(lines(endless.text)).toEqual([
      {
        error: 'The model server sent an event larger than 16384 bytes; the stream was ended.',
        code: 'upstream_error',
      },
    ]);
    const broken = await post('/api/generate', keys.hostile!, { model: MODEL, prompt: 'x' });
    expect(lines(broken.text)).toEqual([
      { model: 'm', done: false },
      { error: 'The model server sent an event that is not valid JSON; the stream was ended.', code: 'upstream_error' },
    ]);
    await expect.poll(() => hostileClosed - before).toBe(2);
  });
});

describe('the model server’s refusals, limits, and what is not there', () => {
  it('the model server’s error status is passed on in Ollama’s shape, with its retry advice', async () => {
    const r = await post('/api/generate', keys.live!, {
      model: MODEL,
      prompt: 'x [[sim fail=http-error errorStatus=503]]',
      stream: false,
    });
    expect({ status: r.status, json: r.json, retry: r.headers['x-should-retry'] }).toEqual({
      status: 503,
      json: {
        error: 'Model server error (HTTP 503): server busy, please try again.  maximum pending requests exceeded',
        code: 'upstream_error',
      },
      retry: 'true',
    });
  });

  it('rpm counts native requests; the 429 is in Ollama’s shape with Retry-After', async () => {
    expect((await post('/api/generate', keys.rpm!, { model: MODEL, prompt: 'x', stream: false })).status).toBe(200);
    const r = await post('/api/chat', keys.rpm!, { model: MODEL, messages: [] });
    expect([r.status, (r.json as { code: string }).code, r.headers['x-should-retry']]).toEqual([
      429,
      'rate_limited',
      'true',
    ]);
    expect(r.headers['retry-after']).toMatch(/^\d+$/);
  });

  it('the tpm reserve is read from options.num_predict: a small cap leaves room, a large one none', async () => {
    const release = sim.hold();
    const held = (numPredict: number) =>
      post('/api/chat', keys.tpm!, {
        model: MODEL,
        messages: [{ role: 'user', content: 'x [[sim chunks=3]]' }],
        options: { num_predict: numPredict },
      });
    const small = held(5);
    await sim.waitFor((q) => q.path === '/api/chat' && q.chunksSent >= 1);
    const second = await post('/api/chat', keys.tpm!, { model: MODEL, messages: [], options: { num_predict: 500 } });
    expect(second.status).toBe(200);
    const large = held(500);
    await sim.waitFor((q) => q.path === '/api/chat' && q.chunksSent >= 1 && q.seq !== sim.requests[0]!.seq);
    const refused = await post('/api/chat', keys.tpm!, { model: MODEL, messages: [] });
    expect([refused.status, (refused.json as { error: string }).error]).toEqual([
      429,
      expect.stringContaining('over its limit of 200 tokens per minute (tpm)'),
    ]);
    release();
    expect([(await small).status, (await large).status]).toEqual([200, 200]);
  });

  it('managing the model server: 403 to any caller; another path: 404; both in Ollama’s shape', async () => {
    for (const [method, url] of [
      ['POST', '/api/pull'],
      ['POST', '/api/push'],
      ['POST', '/api/create'],
      ['POST', '/api/copy'],
      ['DELETE', '/api/delete'],
      ['HEAD', '/api/blobs/sha256:abc'],
      ['POST', '/api/blobs/sha256:abc'],
    ] as const) {
      const r = await d.daemon.dataPlane.inject({ method, url, payload: method === 'HEAD' ? undefined : '{}' });
      expect([url, r.statusCode, r.headers['x-should-retry']]).toEqual([url, 403, 'false']);
      if (method !== 'HEAD') expect((JSON.parse(r.body) as { code: string }).code).toBe('management_route');
    }
    const none = await d.daemon.dataPlane.inject({ method: 'GET', url: '/api/chat' });
    expect({ status: none.statusCode, json: JSON.parse(none.body) as unknown }).toEqual({
      status: 404,
      json: {
        error:
          "No route GET /api/chat. Ollama's API here serves POST /api/chat, POST /api/generate, POST /api/embed, POST /api/show, GET /api/tags, GET /api/ps and GET /api/version.",
        code: 'route_not_found',
      },
    });
    expect(sim.requests).toEqual([]);
  });

  it('listings need a ready instance, as generation does: 409 in Ollama’s shape for a pending one', async () => {
    for (const url of ['/api/tags', '/api/ps', '/api/version']) {
      const r = await d.daemon.dataPlane.inject({
        method: 'GET',
        url,
        headers: { authorization: `Bearer ${keys.later!}` },
      });
      expect([url, r.statusCode, (JSON.parse(r.body) as { code: string }).code]).toEqual([
        url,
        409,
        'deployment_not_ready',
      ]);
    }
    expect(sim.requests).toEqual([]);
  });
});
