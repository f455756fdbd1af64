/**
 * The pack's end on the wire (docs/contract.md §3.8), read through the openai SDK's raw responses:
 * `x-ob-pack-ends-at` on every answer to a key whose instance has a pack end (a completion, a
 * stream, a model listing, a refusal after authentication), `x-ob-pack-ends-soon` and the model
 * object's `pack_ends_soon` from --pack-warning before it, nothing for a key without a pack, and
 * a stream still open at the end ended with `pack_ended`. A daemon in-process on a real port, on
 * an injected clock; the simulator and the SDK are real.
 */
import { Writable } from 'node:stream';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import type { Simulator } from '../../simulator/simulator.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { MODEL, TestClock, startSim } from '../helpers/inproc.js';
import { tmpHome } from '../helpers/processes.js';

const HOUR = 3_600_000;
const clock = new TestClock(Date.parse('2026-12-01T10:00:00.000Z'));
const ENDS = '2026-12-01T12:00:00.000Z';
let daemon: Daemon;
let sim: Simulator;
let simUrl: string;

beforeAll(async () => {
  const home = await tmpHome();
  const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' };
  const logStream = new Writable({
    write(_c, _e, done) {
      done();
    },
  });
  daemon = await startDaemon(config, { version: 'test', clock, store: new MemoryStore(), logStream });
  ({ sim, url: simUrl } = await startSim());
});

afterAll(async () => {
  await daemon?.shutdown(0);
  await sim?.close();
});

async function keyOn(id: string, packEndsAt: string | null, limits?: { rpm: number }): Promise<OpenAI> {
  const lc = daemon.ctx.lifecycle;
  if (!lc.registry.instances.has(id)) {
    await lc.addInstance({ id, model: MODEL, endpoint: simUrl, packEndsAt });
    await lc.ready(id);
  }
  const { secret } = await lc.createKey(id, `key-${lc.registry.keys.size}`, limits);
  return new OpenAI({ baseURL: `${daemon.ctx.baseUrl}/v1`, apiKey: secret, maxRetries: 0 });
}

const ask = { model: MODEL, messages: [{ role: 'user' as const, content: 'hi' }] };

/** The headers this feature adds, as the SDK's response shows them. */
function packOf(headers: Headers): Record<string, string | null> {
  return { at: headers.get('x-ob-pack-ends-at'), soon: headers.get('x-ob-pack-ends-soon') };
}

const MODEL_OBJECT = { id: MODEL, object: 'model', created: expect.any(Number), owned_by: 'ob-proxy' };

it('every answer to a key whose pack ends carries the end: a completion, a stream, the model list, a refusal', async () => {
  const client = await keyOn('gpu-1', '2026-12-01T14:00:00+02:00');
  const plain = await client.chat.completions.create(ask).withResponse();
  expect(plain.data.choices[0]!.message.role).toBe('assistant');
  // Given with an offset, said in UTC.
  expect(packOf(plain.response.headers)).toEqual({ at: ENDS, soon: null });

  const stream = await client.chat.completions.create({ ...ask, stream: true }).withResponse();
  expect(packOf(stream.response.headers)).toEqual({ at: ENDS, soon: null });
  expect(stream.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  let chunks = 0;
  for await (const _ of stream.data) chunks++;
  expect(chunks).toBeGreaterThan(1);

  const models = await client.models.list().withResponse();
  expect(packOf(models.response.headers)).toEqual({ at: ENDS, soon: null });
  expect(models.data.data).toEqual([{ ...MODEL_OBJECT, pack_ends_at: ENDS, pack_ends_soon: false }]);
  const model = await client.models.retrieve(MODEL).withResponse();
  expect(model.data).toEqual({ ...MODEL_OBJECT, pack_ends_at: ENDS, pack_ends_soon: false });
  expect(packOf(model.response.headers)).toEqual({ at: ENDS, soon: null });

  // Refused after authentication: the deployment is not ready (409), and a body that fails validation (400).
  await daemon.ctx.lifecycle.pending('gpu-1');
  const notReady = await client.chat.completions.create(ask).catch((e: unknown) => e);
  expect(notReady).toBeInstanceOf(APIError);
  expect((notReady as APIError).status).toBe(409);
  expect(packOf((notReady as APIError).headers!)).toEqual({ at: ENDS, soon: null });
  await daemon.ctx.lifecycle.ready('gpu-1');
  const invalid = await client.chat.completions
    .create({ ...ask, messages: [{ role: 'user', content: 'hi' }], temperature: 9 })
    .catch((e: unknown) => e);
  expect((invalid as APIError).status).toBe(400);
  expect(packOf((invalid as APIError).headers!)).toEqual({ at: ENDS, soon: null });
});

it('with limits: the x-ratelimit-* headers and the pack end in one answer, a 429 too', async () => {
  const client = await keyOn('gpu-1', null, { rpm: 1 });
  const first = await client.chat.completions.create(ask).withResponse();
  expect(packOf(first.response.headers)).toEqual({ at: ENDS, soon: null });
  expect(first.response.headers.get('x-ratelimit-limit-requests')).toBe('1');
  const over = await client.chat.completions.create(ask).catch((e: unknown) => e);
  expect((over as APIError).status).toBe(429);
  expect(packOf((over as APIError).headers!)).toEqual({ at: ENDS, soon: null });
  expect((over as APIError).headers!.get('x-ratelimit-remaining-requests')).toBe('0');
});

it('from --pack-warning (15 min) before the end, the model and the headers say it ends soon', async () => {
  const client = await keyOn('gpu-1', null);
  clock.ms = Date.parse(ENDS) - 15 * 60_000 - 1;
  expect((await client.models.list()).data[0]).toMatchObject({ pack_ends_soon: false });
  clock.advance(1);
  const models = await client.models.list().withResponse();
  expect(models.data.data).toEqual([{ ...MODEL_OBJECT, pack_ends_at: ENDS, pack_ends_soon: true }]);
  expect(packOf(models.response.headers)).toEqual({ at: ENDS, soon: 'true' });
  const plain = await client.chat.completions.create(ask).withResponse();
  expect(packOf(plain.response.headers)).toEqual({ at: ENDS, soon: 'true' });
});

it("a key without a pack gets none of it, nor another instance's", async () => {
  const client = await keyOn('no-pack', null);
  const plain = await client.chat.completions.create(ask).withResponse();
  expect(packOf(plain.response.headers)).toEqual({ at: null, soon: null });
  const models = await client.models.list().withResponse();
  expect(models.data.data).toEqual([MODEL_OBJECT]);
  expect(packOf(models.response.headers)).toEqual({ at: null, soon: null });
});

it('a stream still open at the pack end ends with the pack_ended error event', async () => {
  const client = await keyOn('short', new Date(clock.now() + HOUR).toISOString());
  const { data: stream, response } = await client.chat.completions
    .create({
      model: MODEL,
      messages: [{ role: 'user', content: 'long [[sim chunks=60 tokensPerSecond=10]]' }],
      stream: true,
    })
    .withResponse();
  expect(packOf(response.headers).at).toBe(new Date(clock.now() + HOUR).toISOString());
  let chunks = 0;
  const ended = (async () => {
    for await (const _ of stream) if (++chunks === 2) clock.advance(HOUR);
  })();
  const err = await ended.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(APIError);
  expect((err as APIError).error).toEqual({
    message: expect.stringContaining('pack'),
    type: 'authentication_error',
    code: 'pack_ended',
    param: null,
  });
  expect(chunks).toBeLessThan(60);
});
