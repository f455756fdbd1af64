/**
 * The key's promise on the Responses WebSocket: the upgrade is refused with the HTTP answer any
 * request would get, each message is held to the key's limits, and a revocation or a pack's end
 * closes the socket with the error event and 1008, the upstream request aborted and no event
 * after. A key keeps at most OB_PROXY_SOCKETS_PER_KEY sockets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance, responsesSent } from '../helpers/inproc-responses.js';
import { type Event, SocketClient, refusedUpgrade, responseIn } from '../helpers/socket-client.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let base: string;

const keyId = (secret: string): string => secret.slice(6, 18);
const codeOf = (e: Event | undefined): unknown => (e?.error as { code?: unknown } | undefined)?.code ?? e?.code;

async function newKey(instance: string, limits?: Record<string, number>): Promise<string> {
  const made = await d.manage('POST', '/v1/keys', {
    instance,
    name: `k${Math.random()}`,
    ...(limits ? { limits } : {}),
  });
  expect(made.status).toBe(201);
  return (made.json as { secret: string }).secret;
}

beforeAll(async () => {
  d = await buildInproc({ socketsPerKey: 2 });
  await d.daemon.listen();
  ({ sim, url: simUrl } = await startSim());
  await readyInstance(d, 'gpu-1', simUrl);
  base = d.daemon.ctx.baseUrl;
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('the upgrade', () => {
  it('is refused as any request is: no key, an unknown key, a revoked key', async () => {
    const refused = async (key: string | null): Promise<unknown> => {
      const r = await refusedUpgrade(SocketClient.open(base, key));
      return [r.status, (r.body as { error: { code: string } }).error.code, r.headers['x-should-retry']];
    };
    expect(await refused(null)).toEqual([400, 'missing_api_key', 'false']);
    expect(await refused(`ob_sk_${'a'.repeat(12)}_${'b'.repeat(38)}`)).toEqual([401, 'invalid_api_key', 'false']);
    const revoked = await newKey('gpu-1');
    expect((await d.manage('POST', `/v1/keys/${keyId(revoked)}/revoke`, {})).status).toBe(200);
    expect(await refused(revoked)).toEqual([401, 'revoked_api_key', 'false']);
  });

  it('a plain GET is an unknown route, as before, whatever its key', async () => {
    const res = await fetch(`${base}/v1/responses`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
  });

  it('a key keeps at most OB_PROXY_SOCKETS_PER_KEY sockets', async () => {
    const key = await newKey('gpu-1');
    const open = [await SocketClient.open(base, key), await SocketClient.open(base, key)];
    const third = await refusedUpgrade(SocketClient.open(base, key));
    expect(third.status).toBe(429);
    expect(third.body).toEqual({
      error: {
        message:
          'This API key has 2 Responses WebSockets open, as many as a key may keep (OB_PROXY_SOCKETS_PER_KEY). Close one, or send requests over HTTP.',
        type: 'rate_limit_error',
        code: 'rate_limited',
        param: null,
      },
    });
    // Another key's count is its own, and a closed socket frees its place.
    const other = await SocketClient.open(base, await newKey('gpu-1'));
    open[0]!.close();
    await open[0]!.closed;
    await expect
      .poll(async () =>
        SocketClient.open(base, key).then(
          (s) => (open.push(s), true),
          () => false,
        ),
      )
      .toBe(true);
    for (const s of [...open, other]) s.close();
  });
});

it('OB_PROXY_SOCKETS_PER_KEY=0 turns the mode off: the upgrade is an unknown route', async () => {
  const off = await buildInproc({ socketsPerKey: 0 });
  try {
    await off.daemon.listen();
    const k = await readyInstance(off, 'gpu-1', simUrl);
    const r = await refusedUpgrade(SocketClient.open(off.daemon.ctx.baseUrl, k));
    expect([r.status, (r.body as { error: { code: string } }).error.code]).toEqual([404, 'route_not_found']);
  } finally {
    await off.close();
  }
});

describe('revocation and pack end', () => {
  it('a key revoked mid-stream: its error event last, 1008, the upstream aborted', async () => {
    const key = await newKey('gpu-1');
    const c = await SocketClient.open(base, key);
    // Six events, then the model server holds the stream open.
    c.send({
      type: 'response.create',
      model: MODEL,
      input: 'long [[sim fail=hang-mid-stream failAfterChunks=6 chunks=50]]',
    });
    await c.until((es) => es.filter((e) => e.type === 'response.output_text.delta').length === 2);
    expect((await d.manage('POST', `/v1/keys/${keyId(key)}/revoke`, {})).status).toBe(200);
    expect(await c.closed).toEqual({ code: 1008, reason: 'revoked_api_key' });
    expect(c.events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'error',
    ]);
    expect(c.events.at(-1)).toEqual({
      type: 'error',
      code: 'revoked_api_key',
      message:
        'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
      param: null,
      sequence_number: 6,
    });
    const upstream = await sim.waitFor((r) => r.path === '/v1/responses' && r.aborted);
    expect(upstream.chunksSent).toBe(6);
    expect(d.daemon.ctx.inflight.count(keyId(key))).toBe(0);
  });

  it('an idle socket of a revoked key is closed with the error event', async () => {
    const key = await newKey('gpu-1');
    const c = await SocketClient.open(base, key);
    expect((await d.manage('POST', `/v1/keys/${keyId(key)}/revoke`, {})).status).toBe(200);
    expect(await c.closed).toEqual({ code: 1008, reason: 'revoked_api_key' });
    expect(c.events).toEqual([
      {
        type: 'error',
        status: 401,
        error: {
          message:
            'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
          type: 'authentication_error',
          code: 'revoked_api_key',
          param: null,
        },
      },
    ]);
  });

  it("a pack's end closes its keys' sockets with pack_ended", async () => {
    const made = await d.manage('POST', '/v1/instances', {
      id: 'packed',
      model: MODEL,
      endpoint: simUrl,
      packEndsAt: new Date(T0 + 3_600_000).toISOString(),
    });
    expect(made.status).toBe(201);
    const ready = await d.manage('POST', '/v1/instances/packed/ready', { probe: false });
    const key = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
    const c = await SocketClient.open(base, key);
    expect(c.headers['x-ob-pack-ends-at']).toBe('2026-11-23T13:00:00.000Z');
    expect(responseIn(await c.create({ model: MODEL, input: 'hi [[sim chunks=1]]' })).status).toBe('completed');
    d.clock.advance(2 * 3_600_000);
    // The in-flight sweep sees it within its period, and ends the pack.
    expect(await c.closed).toEqual({ code: 1008, reason: 'pack_ended' });
    expect(codeOf(c.events.at(-1))).toBe('pack_ended');
  });
});

describe('limits, per message', () => {
  it('a key at its requests per minute is refused in the message; the socket stays open', async () => {
    const key = await newKey('gpu-1', { rpm: 1 });
    const c = await SocketClient.open(base, key);
    expect(responseIn(await c.create({ model: MODEL, input: 'one [[sim chunks=1]]' })).status).toBe('completed');
    const sent = responsesSent(sim).length;
    const refused = await c.create({ model: MODEL, input: 'two' });
    expect(refused).toEqual([
      {
        type: 'error',
        status: 429,
        error: expect.objectContaining({
          code: 'rate_limited',
          message: expect.stringMatching(/^This API key is over its limit of 1 requests per minute \(rpm\)/),
        }),
      },
    ]);
    expect(responsesSent(sim).length).toBe(sent);
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    c.close();
  });

  it('a key at its tokens per minute is refused before anything is sent', async () => {
    const key = await newKey('gpu-1', { tpm: 10 });
    const c = await SocketClient.open(base, key);
    expect(responseIn(await c.create({ model: MODEL, input: 'one [[sim chunks=20]]' })).status).toBe('completed');
    const sent = responsesSent(sim).length;
    const refused = await c.create({ model: MODEL, input: 'two' });
    expect(codeOf(refused[0])).toBe('rate_limited');
    expect((refused[0]!.error as { message: string }).message).toMatch(/tokens per minute \(tpm\)/);
    expect(responsesSent(sim).length).toBe(sent);
    c.close();
  });
});
