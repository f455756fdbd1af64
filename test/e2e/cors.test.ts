import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';
import { type ServeProcess, type SimProcess, startServe, tmpHome } from '../helpers/processes.js';

const MODEL = 'gemma4:26b';
const APP = 'http://app.example';
let sim: SimProcess;
let serve: ServeProcess;
let plain: ServeProcess;
let key: string;

beforeAll(async () => {
  ({ sim, serve, key } = await startDaemonAndSim({ env: { OB_PROXY_CORS_ORIGINS: `${APP}, http://other.example` } }));
  plain = await startServe(await tmpHome());
});

afterAll(async () => {
  await serve?.stop();
  await plain?.stop();
  await sim?.stop();
});

describe('CORS for browser clients (OB_PROXY_CORS_ORIGINS)', () => {
  it('answers a preflight from an allowed origin without a key', async () => {
    const r = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: {
        origin: APP,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, x-stainless-os',
      },
    });
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe(APP);
    expect(r.headers.get('access-control-allow-methods')).toBe('GET, POST, OPTIONS');
    expect(r.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-stainless-os');
    expect(r.headers.get('vary')).toBe('Origin');
  });

  it.each(['/v1/responses', '/v1/completions', '/v1/messages', '/v1/models', `/v1/models/${MODEL}`])(
    "answers the preflight of %s, the Anthropic SDK's headers allowed by default",
    async (path) => {
      const r = await fetch(`${serve.baseUrl}${path}`, {
        method: 'OPTIONS',
        headers: { origin: APP, 'access-control-request-method': 'POST' },
      });
      expect(r.status).toBe(204);
      expect(r.headers.get('access-control-allow-origin')).toBe(APP);
      expect(r.headers.get('access-control-allow-headers')?.split(', ')).toEqual(
        expect.arrayContaining(['x-api-key', 'anthropic-version', 'anthropic-beta', 'authorization']),
      );
    },
  );

  it('marks proxied answers and errors readable by the allowed origin, and no other', async () => {
    const call = (origin: string, k: string): Promise<Response> =>
      fetch(`${serve.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { origin, authorization: `Bearer ${k}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
      });
    const ok = await call(APP, key);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe(APP);
    expect(ok.headers.get('access-control-expose-headers')).toBe(
      'x-request-id, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens, retry-after, retry-after-ms, x-ob-pack-ends-at, x-ob-pack-ends-soon',
    );
    const denied = await call(APP, 'ob_sk_wrong');
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe(APP);
    const foreign = await call('http://evil.example', key);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('is off by default: no CORS headers, and OPTIONS is not a route', async () => {
    const r = await fetch(`${plain.baseUrl}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: APP } });
    expect(r.status).toBe(404);
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
  });
});
