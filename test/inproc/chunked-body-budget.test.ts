/**
 * A chunked body (no Content-Length) in the byte budget (docs/reliability.md): held chunk by
 * chunk as the body reader takes it in, refused at the first chunk past the key's share (429)
 * or the daemon's room (503), given back when its answer is written. Through `inject()` with a
 * stream payload, so the chunks arrive one at a time; the simulator's record says what reached
 * the model server.
 */
import { Readable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { type Inproc, MODEL, buildInproc, chatRequests, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
const keys: string[] = [];

beforeAll(async () => {
  // Each key may hold 4 KiB, the daemon 6 KiB: two keys' bodies can fill the daemon without
  // either passing its share.
  d = await buildInproc({ bodyLimit: 4096, bodyMemory: 6144, bodyMemoryPerKey: 4096 });
  let url: string;
  ({ sim, url } = await startSim());
  for (const id of ['one', 'two']) {
    expect((await d.manage('POST', '/v1/instances', { id, model: MODEL, endpoint: url })).status).toBe(201);
    const ready = await d.manage('POST', `/v1/instances/${id}/ready`, {});
    keys.push((ready.json as { defaultKey: { secret: string } }).defaultKey.secret);
  }
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

/** A chat request whose body is `size` bytes of JSON, cut in two chunks at `cut`. */
function body(size: number): Buffer {
  const head = `{"model":"${MODEL}","messages":[{"role":"user","content":"`;
  const tail = '"}]}';
  return Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail);
}

/** Sends `bytes` chunked; the second chunk goes only when `release` resolves. */
function sendChunked(key: string, bytes: Buffer, cut: number, release: Promise<void> = Promise.resolve()) {
  const payload = new Readable({ read() {} });
  payload.push(bytes.subarray(0, cut));
  void release.then(() => {
    payload.push(bytes.subarray(cut));
    payload.push(null);
  });
  return d.daemon.dataPlane.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    payload,
  });
}

/** Resolves once the daemon holds `n` bytes of bodies. */
async function heldReaches(n: number): Promise<void> {
  for (let i = 0; i < 200 && d.daemon.ctx.bodies.held !== n; i++) await new Promise((r) => setImmediate(r));
  expect(d.daemon.ctx.bodies.held).toBe(n);
}

it('a chunked body within the bounds reaches the model server whole, and is given back', async () => {
  const bytes = body(3000);
  const before = chatRequests(sim).length;
  const r = await sendChunked(keys[0]!, bytes, 1000);
  expect(r.statusCode).toBe(200);
  expect(JSON.parse(r.body)).toMatchObject({ object: 'chat.completion', model: MODEL });
  const sent = chatRequests(sim).slice(before);
  expect(sent.map((s) => s.body)).toEqual([JSON.parse(bytes.toString())]);
  expect(d.daemon.ctx.bodies.held).toBe(0);
});

it("past the key's share: 429 at the chunk that passes it, nothing sent upstream, the bytes given back", async () => {
  // The share is passed by a second body while the first is held, half read.
  const before = chatRequests(sim).length;
  let release!: () => void;
  const first = sendChunked(keys[0]!, body(4000), 3000, new Promise((ok) => (release = ok)));
  await heldReaches(3000);
  const second = await sendChunked(keys[0]!, body(2000), 1500);
  expect({ status: second.statusCode, json: JSON.parse(second.body), close: second.headers.connection }).toEqual({
    status: 429,
    json: obError('rate_limited', {
      message:
        "This API key already has 2.9 KiB of request bodies in flight, its share of the proxy's memory (4.0 KiB, --body-memory-per-key). Retry when some of its requests are over, or send fewer or smaller requests at once.",
    }).toBody(),
    close: 'close',
  });
  expect(second.headers['retry-after']).toBe('1');
  release();
  expect((await first).statusCode).toBe(200);
  expect(chatRequests(sim).length - before).toBe(1);
  expect(d.daemon.ctx.bodies.held).toBe(0);
});

it("past the daemon's room: 503 proxy_overloaded, while another key's body is held", async () => {
  const before = chatRequests(sim).length;
  let release!: () => void;
  const first = sendChunked(keys[0]!, body(4000), 4000 - 1, new Promise((ok) => (release = ok)));
  await heldReaches(3999);
  const second = await sendChunked(keys[1]!, body(3000), 2000);
  expect({ status: second.statusCode, json: JSON.parse(second.body), retry: second.headers['retry-after'] }).toEqual({
    status: 503,
    json: obError('proxy_overloaded').toBody(),
    retry: '1',
  });
  release();
  expect((await first).statusCode).toBe(200);
  expect(chatRequests(sim).length - before).toBe(1);
  expect(d.daemon.ctx.bodies.held).toBe(0);
});
