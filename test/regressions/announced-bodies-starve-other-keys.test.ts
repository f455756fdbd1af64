/**
 * Regression: the body budget was held from Content-Length before a byte of the body came, and
 * given back only at the 120 s request time-out. One client with 4 keys opened 16 connections and
 * sent headers only, each announcing a body near --body-limit (2,976 bytes in all): the daemon's
 * 256 MiB were held for nothing, and a key of another instance got 503 proxy_overloaded on 12 of
 * 12 requests; reopening them every 120 s kept everyone out. Now a body is held as its bytes
 * arrive, a body that stops arriving is ended after OB_PROXY_BODY_TIMEOUT (408, connection
 * closed), and the keys of one instance hold at most --body-memory-per-instance, so a client
 * sending real bytes with any number of keys leaves other instances room too.
 *
 * Each upload says `Expect: 100-continue`, so that its 100 tells the test the daemon has taken
 * its headers past the key's checks, where the budget was held.
 */
import { afterEach, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config-resolve.js';
import type { Simulator } from '../../simulator/simulator.js';
import { type RawConnection, chatHead, openConnection } from '../helpers/raw-connection.js';
import { type Harness, chatBody, readyInstance, startHarness, startSim } from '../reliability/harness.js';

const MiB = 1024 * 1024;
let h: Harness | undefined;
let sim: Simulator | undefined;
const conns: RawConnection[] = [];

afterEach(async () => {
  for (const c of conns.splice(0)) c.close();
  await h?.stop();
  await sim?.close();
});

/** A ready instance `id` with `n` keys; their secrets. */
async function instance(harness: Harness, id: string, url: string, n: number): Promise<string[]> {
  const secrets = [await readyInstance(harness, id, url)];
  for (let i = 1; i < n; i++) secrets.push((await harness.daemon.ctx.lifecycle.createKey(id, `k${i}`)).secret);
  return secrets;
}

async function chat(harness: Harness, secret: string, body = JSON.stringify(chatBody('hello'))) {
  const res = await fetch(`${harness.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body,
  });
  const json = (await res.json()) as { object?: string; error?: { code: string } };
  return { status: res.status, what: json.object ?? json.error?.code };
}

it("16 headers-only uploads from one client's 4 keys leave another instance's key at 200", async () => {
  h = await startHarness();
  const started = await startSim();
  sim = started.sim;
  const uploaders = await instance(h, 'gpu-1', started.url, 4);
  const [other] = await instance(h, 'gpu-2', started.url, 1);
  const host = new URL(h.baseUrl).host;
  let sent = 0;
  for (const secret of uploaders)
    for (let i = 0; i < 4; i++) {
      const c = await openConnection(h.baseUrl, { halfOpen: true });
      conns.push(c);
      const head = chatHead(host, secret, h.config.bodyLimit, 'Expect: 100-continue\r\n');
      sent += Buffer.byteLength(head);
      c.write(head);
    }
  for (const c of conns) expect((await c.answer()).status).toBe(100);

  expect({ other: await chat(h, other!), held: h.daemon.ctx.bodies.held }).toEqual({
    other: { status: 200, what: 'chat.completion' },
    held: 0,
  });
  expect(sent).toBeLessThan(4000);
  // The default: a body stalled for seconds is ended, never held for the request's 120 s.
  expect(resolveConfig({ home: '/h' }, {}, '/h').bodyTimeoutMs).toBe(10_000);
});

it('a body that stops arriving, before its first byte or after some, is ended with 408 and gives its bytes back', async () => {
  h = await startHarness({ bodyTimeoutMs: 300 });
  const started = await startSim();
  sim = started.sim;
  const [secret] = await instance(h, 'gpu-1', started.url, 1);
  const host = new URL(h.baseUrl).host;
  const none = await openConnection(h.baseUrl, { halfOpen: true });
  const some = await openConnection(h.baseUrl, { halfOpen: true });
  conns.push(none, some);
  none.write(chatHead(host, secret!, 1000));
  some.write(chatHead(host, secret!, 1000) + 'x'.repeat(400));
  for (const c of [none, some]) {
    const a = await c.answer(10_000);
    expect({ status: a.status, connection: a.headers.connection, body: JSON.parse(a.body) }).toEqual({
      status: 408,
      connection: 'close',
      body: {
        error: {
          message:
            'The request body stopped arriving: none of it came for 0.3 s (OB_PROXY_BODY_TIMEOUT). Send the whole body at once.',
          type: 'invalid_request_error',
          code: 'request_timeout',
          param: null,
        },
      },
    });
  }
  expect([h.daemon.ctx.bodies.held, h.daemon.ctx.bodyReads.size]).toEqual([0, 0]);
  expect(await chat(h, secret!)).toEqual({ status: 200, what: 'chat.completion' });
});

it("one instance's keys, sending real bytes, hold at most its share: another instance still has room", async () => {
  const config = { bodyLimit: MiB, bodyMemory: 4 * MiB, bodyMemoryPerKey: MiB, bodyMemoryPerInstance: 2 * MiB };
  const harness = await startHarness(config);
  h = harness;
  const started = await startSim();
  sim = started.sim;
  const uploaders = await instance(h, 'gpu-1', started.url, 4);
  const [other] = await instance(h, 'gpu-2', started.url, 1);
  const host = new URL(h.baseUrl).host;
  // Each key sends 900 KiB of a 1 MiB body and holds the rest back: two fit the instance's share.
  // One after the other, each first held (or refused) before the next is sent: which two fit is
  // then the order written, not the order a busy machine happens to read them in.
  for (const [i, secret] of uploaders.entries()) {
    const c = await openConnection(h.baseUrl, { halfOpen: true });
    conns.push(c);
    c.write(chatHead(host, secret, MiB) + 'x'.repeat(900 * 1024));
    if (i < 2)
      await expect
        .poll(() => harness.daemon.ctx.bodies.heldFor('gpu-1'), { timeout: 10_000 })
        .toBeGreaterThanOrEqual((i + 1) * 900 * 1024);
  }
  const refused = [];
  for (const c of conns.slice(2)) refused.push(await c.answer(10_000));
  for (const a of refused)
    expect({ status: a.status, code: (JSON.parse(a.body) as { error: { code: string } }).error.code }).toEqual({
      status: 429,
      code: 'rate_limited',
    });
  expect(JSON.parse(refused[0]!.body).error.message).toMatch(
    /^The keys of this API key's instance already have .* of request bodies in flight, the instance's share of the proxy's memory \(2\.0 MiB, --body-memory-per-instance\)\./,
  );
  expect(h.daemon.ctx.bodies.heldFor('gpu-1')).toBeLessThanOrEqual(2 * MiB);
  const body = JSON.stringify(chatBody('y'.repeat(MiB - 1024)));
  expect(await chat(h, other!, body)).toEqual({ status: 200, what: 'chat.completion' });
});
