/**
 * What a client is told about trying again (docs/contract.md §3b, "Retries"): a refusal the same
 * request meets again says `x-should-retry: false`, so the SDKs and the agents built on them stop
 * at once instead of retrying for minutes; a wait that passes (429, 503) says `x-should-retry:
 * true` with a Retry-After. Also the agents' connectivity checks, answered by the proxy with no
 * key and no refusal line, and count_tokens on a model server that lacks it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance } from '../helpers/inproc-responses.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
const keys: Record<string, string> = {};

beforeAll(async () => {
  d = await buildInproc({ bodyLimit: 4096 });
  ({ sim, url: simUrl } = await startSim({ models: [MODEL] }));
  for (const id of ['live', 'revoked', 'removed', 'pending']) keys[id] = await readyInstance(d, id, simUrl);
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  await d.manage('DELETE', '/v1/instances/removed');
  await d.manage('POST', '/v1/instances/pending/pending', {});
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

const chat = (key: string | null, payload: unknown, url = '/v1/chat/completions') =>
  d.daemon.dataPlane.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

const hello = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };

describe('x-should-retry on every refusal the proxy answers', () => {
  it.each([
    ['no key', null, hello, 400, 'missing_api_key'],
    ['an unknown key', 'ob_sk_nope', hello, 401, 'invalid_api_key'],
    ['a revoked key', 'revoked', hello, 401, 'revoked_api_key'],
    ['a removed deployment', 'removed', hello, 404, 'deployment_not_found'],
    ['a bad body', 'live', '{not json', 400, 'invalid_json'],
    ['another model', 'live', { ...hello, model: 'qwen3.6:27b' }, 400, 'model_mismatch'],
    ['a body over the limit', 'live', { ...hello, pad: 'x'.repeat(5000) }, 413, 'payload_too_large'],
  ])('%s: %i with x-should-retry false and Retry-After 0', async (_what, key, payload, status, code) => {
    const r = await chat(key === null || key.startsWith('ob_sk_') ? key : keys[key]!, payload);
    expect({ status: r.statusCode, code: (r.json() as { error: { code: string } }).error.code }).toEqual({
      status,
      code,
    });
    expect([r.headers['x-should-retry'], r.headers['retry-after']]).toEqual(['false', '0']);
  });

  it('an instance that may become ready again: 409 with no advice, the client’s own rule', async () => {
    const r = await chat(keys.pending!, hello);
    expect(r.statusCode).toBe(409);
    expect(r.json()).toMatchObject({
      error: {
        code: 'deployment_not_ready',
        message: 'The deployment "pending" for this API key is pending. Retry when it is ready.',
      },
    });
    expect(r.headers['x-should-retry']).toBeUndefined();
  });

  it('a model server’s own refusal passed on: the same advice by its status', async () => {
    const r = await chat(keys.live!, {
      ...hello,
      messages: [{ role: 'user', content: 'x [[sim fail=http-error errorStatus=400]]' }],
    });
    expect(r.statusCode).toBe(400);
    expect(r.headers['x-should-retry']).toBe('false');
    const busy = await chat(keys.live!, {
      ...hello,
      messages: [{ role: 'user', content: 'x [[sim fail=http-error errorStatus=503]]' }],
    });
    expect(busy.statusCode).toBe(503);
    expect([busy.headers['x-should-retry'], busy.headers['retry-after']]).toEqual(['true', '1']);
  });

  it('Messages: the same advice, Anthropic’s type, our code', async () => {
    const r = await d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/messages?beta=true',
      headers: { 'content-type': 'application/json', 'x-api-key': keys.revoked! },
      payload: JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect({ status: r.statusCode, retry: r.headers['x-should-retry'], body: r.json() as unknown }).toEqual({
      status: 401,
      retry: 'false',
      body: {
        type: 'error',
        error: {
          type: 'authentication_error',
          message:
            'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
          code: 'revoked_api_key',
        },
      },
    });
  });
});

describe('what agents ask before their first request', () => {
  it.each(['/api/hello', '/'])('HEAD and GET %s: 200 with no key, and no refusal in the log', async (url) => {
    const before = d.logs.length;
    const head = await d.daemon.dataPlane.inject({ method: 'HEAD', url });
    const get = await d.daemon.dataPlane.inject({ method: 'GET', url });
    expect([head.statusCode, get.statusCode, get.json()]).toEqual([200, 200, { status: 'ok' }]);
    expect(d.logs.slice(before).filter((l) => l.msg === 'refused')).toEqual([]);
  });

  it('count_tokens on a model server without it: Anthropic’s 404, after one ask', async () => {
    const ask = () =>
      d.daemon.dataPlane.inject({
        method: 'POST',
        url: '/v1/messages/count_tokens?beta=true',
        headers: { 'content-type': 'application/json', 'x-api-key': keys.live!, 'anthropic-version': '2023-06-01' },
        payload: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
      });
    const asked = sim.requests.length;
    const first = await ask();
    expect(first.statusCode).toBe(404);
    expect(first.headers['x-should-retry']).toBe('false');
    expect((first.json() as { type: string; error: { type: string } }).error.type).toBe('not_found_error');
    expect(sim.requests.slice(asked).map((q) => q.path)).toEqual(['/v1/messages/count_tokens']);
    const again = await ask();
    expect(again.json()).toEqual(first.json());
    expect(sim.requests.length).toBe(asked + 1);
  });
});
