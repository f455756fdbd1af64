/**
 * What a Responses WebSocket may hold, and for how long: one response at a time (a flood of
 * messages is refused unread, and a client that reads none of the refusals is closed), a message
 * of at most --body-limit, its last response in the key's share of body memory (so a key's
 * sockets together hold no more than --body-memory-per-key), and an idle time. Other upgrades
 * (curl's `Upgrade: h2c`) are served as the plain requests they always were.
 */
import { request } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance, responsesSent } from '../helpers/inproc-responses.js';
import { SocketClient, responseIn } from '../helpers/socket-client.js';

const KIB = 1024;
let d: Inproc;
let sim: Simulator;
let key: string;
let base: string;

const keyId = (secret: string): string => secret.slice(6, 18);

beforeAll(async () => {
  // Small bounds, so that a few messages reach them: a message of 32 KiB at most, a key's
  // bodies and sockets' last responses 64 KiB together.
  d = await buildInproc({ bodyLimit: 32 * KIB, bodyMemoryPerKey: 64 * KIB, bodyMemory: 256 * KIB });
  await d.daemon.listen();
  let url: string;
  ({ sim, url } = await startSim());
  key = await readyInstance(d, 'gpu-1', url);
  base = d.daemon.ctx.baseUrl;
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('one response at a time', () => {
  it('a flood of messages while a response streams is refused, unread; one request goes upstream', async () => {
    const c = await SocketClient.open(base, key);
    const sent = responsesSent(sim).length;
    c.send({ type: 'response.create', model: MODEL, input: 'slow [[sim tokensPerSecond=50 chunks=10]]' });
    await c.until((es) => es.some((e) => e.type === 'response.created'));
    for (let i = 0; i < 200; i++) c.send({ type: 'response.create', model: MODEL, input: `flood ${i}` });
    await c.until((es) => es.some((e) => e.type === 'response.completed'));
    const refusals = c.events.filter((e) => e.type === 'error');
    expect(refusals).toHaveLength(200);
    expect(refusals[0]).toEqual({
      type: 'error',
      status: 409,
      error: {
        message:
          'A response is under way on this WebSocket: send the next response.create once it has ended, or open another socket.',
        type: 'conflict_error',
        code: 'response_in_progress',
        param: null,
      },
    });
    expect(responsesSent(sim).length).toBe(sent + 1);
    expect(responseIn(await c.create({ model: MODEL, input: 'after [[sim chunks=1]]' })).status).toBe('completed');
    c.close();
  });

  it('a client that reads none of its refusals is dropped once a MiB of them waits', async () => {
    const made = await d.manage('POST', '/v1/keys', { instance: 'gpu-1', name: 'deaf' });
    const deaf = (made.json as { secret: string }).secret;
    const c = await SocketClient.open(base, deaf);
    c.send({ type: 'response.create', model: MODEL, input: 'held [[sim fail=hang-mid-stream failAfterChunks=3]]' });
    await c.until((es) => es.some((e) => e.type === 'response.created'));
    const tcp = (c.ws as unknown as { _socket: Socket })._socket;
    tcp.pause();
    const dropped = (): boolean => d.logs.some((l) => l.msg === 'websocket closed' && l.key === keyId(deaf));
    let sent = 0;
    // Past the kernel's buffers (a few MiB on loopback), the daemon's own; bounded either way.
    while (sent < 200_000 && !dropped()) {
      for (let i = 0; i < 1000; i++, sent++) c.send({ type: 'response.create', model: MODEL, input: 'x' });
      await new Promise((r) => setImmediate(r));
    }
    await expect.poll(dropped).toBe(true);
    expect(d.logs.find((l) => l.msg === 'websocket closed' && l.key === keyId(deaf))).toMatchObject({
      reason: 'the client does not read its messages',
    });
    tcp.resume();
    await c.closed;
    expect(c.events.filter((e) => e.type === 'error').length).toBeLessThan(sent);
    // Its response ended with it: the upstream request aborted.
    await sim.waitFor((r) => r.path === '/v1/responses' && r.aborted);
    expect(d.daemon.ctx.inflight.count(keyId(deaf))).toBe(0);
  });
});

describe('memory', () => {
  it('a message over --body-limit closes the socket (1009) before it is read', async () => {
    const c = await SocketClient.open(base, key);
    const sent = responsesSent(sim).length;
    c.send({ type: 'response.create', model: MODEL, input: 'x'.repeat(33 * KIB) });
    expect((await c.closed).code).toBe(1009);
    expect(responsesSent(sim).length).toBe(sent);
  });

  it("a socket's last response is held in its key's share of body memory, and let go when it closes", async () => {
    const bodies = d.daemon.ctx.bodies;
    const id = keyId(key);
    expect(bodies.heldBy(id)).toBe(0);
    const text = 'y'.repeat(20 * KIB);
    const a = await SocketClient.open(base, key);
    const ra = responseIn(await a.create({ model: MODEL, input: `${text} [[sim chunks=1]]` }));
    const one = bodies.heldBy(id);
    // The input sent and the response's own JSON: more than the text, less than the key's share.
    expect(one).toBeGreaterThan(20 * KIB);
    expect(one).toBeLessThan(32 * KIB);

    const b = await SocketClient.open(base, key);
    await b.create({ model: MODEL, input: `${text} [[sim chunks=1]]` });
    const two = bodies.heldBy(id);
    expect(two).toBe(2 * one);

    // A third socket's message that fits in what is left of the key's share is sent, but its
    // response, larger, is not kept: its continuation is not found, and its client sends the
    // conversation in full.
    const room = 64 * KIB - two;
    const c = await SocketClient.open(base, key);
    const rc = responseIn(await c.create({ model: MODEL, input: `${'z'.repeat(room - 400)} [[sim chunks=1]]` }));
    expect(rc.status).toBe('completed');
    expect(bodies.heldBy(id)).toBe(two);
    const cont = await c.create({ model: MODEL, previous_response_id: rc.id, input: 'more' });
    expect((cont[0]!.error as { code: string }).code).toBe('previous_response_not_found');
    // And a message the key has no room left for is refused, before anything is sent.
    const sent = responsesSent(sim).length;
    const refused = await c.create({ model: MODEL, input: 'z'.repeat(room + 100) });
    expect(refused).toEqual([
      {
        type: 'error',
        status: 429,
        error: expect.objectContaining({
          code: 'rate_limited',
          message: expect.stringMatching(/--body-memory-per-key/),
        }),
      },
    ]);
    expect(responsesSent(sim).length).toBe(sent);
    expect(bodies.heldBy(id)).toBe(two);
    // The first socket still continues its own.
    expect(
      responseIn(await a.create({ model: MODEL, previous_response_id: ra.id, input: 'ok [[sim chunks=1]]' })).status,
    ).toBe('completed');

    for (const s of [a, b, c]) s.close();
    await Promise.all([a.closed, b.closed, c.closed]);
    await expect.poll(() => bodies.heldBy(id)).toBe(0);
  });
});

describe('idle time', () => {
  it('a socket with nothing under way closes after OB_PROXY_SOCKET_IDLE_TIMEOUT', async () => {
    const idle = await buildInproc({ socketIdleTimeoutMs: 50 });
    const own = await startSim();
    try {
      await idle.daemon.listen();
      const k = await readyInstance(idle, 'gpu-1', own.url);
      const c = await SocketClient.open(idle.daemon.ctx.baseUrl, k);
      expect(await c.closed).toEqual({ code: 1000, reason: 'idle' });
      await expect
        .poll(() => idle.logs.find((l) => l.msg === 'websocket closed'))
        .toMatchObject({ code: 1000, reason: 'idle', messages: 0 });
    } finally {
      await idle.close();
      await own.sim.close();
    }
  });

  it('a drain closes idle sockets at once, going away (1001)', async () => {
    const drained = await buildInproc();
    const own = await startSim();
    await drained.daemon.listen();
    const k = await readyInstance(drained, 'gpu-1', own.url);
    const c = await SocketClient.open(drained.daemon.ctx.baseUrl, k);
    await drained.close();
    expect(await c.closed).toEqual({ code: 1001, reason: 'shutting_down' });
    await own.sim.close();
  });
});

it("curl's Upgrade: h2c on a POST is served as the plain request it is", async () => {
  const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi [[sim chunks=1]]' }] });
  const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        connection: 'Upgrade, HTTP2-Settings',
        upgrade: 'h2c',
        'http2-settings': 'AAMAAABkAAQCAAAAAAIAAAAA',
      },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
  expect(answer.status).toBe(200);
  expect(JSON.parse(answer.text)).toMatchObject({ object: 'chat.completion', model: MODEL });
});
