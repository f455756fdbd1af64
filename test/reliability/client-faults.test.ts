/**
 * Client faults: a client that goes away cancels the upstream request (the simulated
 * instance records the abort), streaming or not, before or after headers, and the usage so far is
 * still counted; a client that sends too slowly is cut off; an oversized body is refused with 413
 * without being read to the end.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import type { KeyRecord } from '../../src/domain/key.js';
import type { RecordedRequest, Simulator } from '../../simulator/simulator.js';
import { type Harness, chatBody, eventually, readyInstance, startHarness, startSim } from './harness.js';

let h: Harness;
let sim: Simulator;
let key: string;
const abortTimes: number[] = [];

beforeAll(async () => {
  h = await startHarness({ requestTimeoutMs: 1_000, bodyLimit: 64 * 1024 });
  const s = await startSim({ chunks: 6 });
  sim = s.sim;
  key = await readyInstance(h, 'clients', s.url);
});

afterAll(async () => {
  await h.stop();
  await sim.close();
  // Figures for docs/reliability.md.
  console.log(JSON.stringify({ suite: 'client-faults', abortToUpstreamCancelMs: abortTimes }));
});

function keyRecord(): KeyRecord {
  const k = [...h.daemon.ctx.lifecycle.registry.keys.values()].find((x) => x.instance === 'clients');
  if (k === undefined) throw new Error('no key');
  return k;
}

/** A raw client: we decide exactly when bytes go out and when the socket dies. */
function open(): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  const url = new URL(h.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let text = '';
    socket.setEncoding('utf8').on('data', (s: string) => {
      text += s;
    });
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', () => {});
    socket.once('connect', () => resolve({ socket, received: () => text, closed }));
    socket.once('error', reject);
  });
}

function head(bodyLength: number | 'chunked', extra = ''): string {
  const len = bodyLength === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${bodyLength}`;
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${len}\r\n${extra}\r\n`;
}

function send(
  body: Record<string, unknown>,
): Promise<{ socket: Socket; received: () => string; closed: Promise<void> }> {
  const text = JSON.stringify(body);
  return open().then((c) => {
    c.socket.write(head(Buffer.byteLength(text)) + text);
    return c;
  });
}

async function upstreamFor(tag: string): Promise<RecordedRequest> {
  return eventually(() => sim.requests.find((r) => JSON.stringify(r.body).includes(tag)), `upstream request ${tag}`);
}

/** Kills the client, then waits for the simulated instance to see its request closed. */
async function disconnectAndAwaitCancel(socket: Socket, tag: string): Promise<RecordedRequest> {
  const t0 = Date.now();
  socket.destroy();
  const rec = await eventually(
    () => {
      const r = sim.requests.find((x) => JSON.stringify(x.body).includes(tag));
      return r !== undefined && r.endedAt !== null ? r : undefined;
    },
    `upstream ${tag} cancelled`,
    10_000,
  );
  abortTimes.push((rec.endedAt ?? 0) - t0);
  return rec;
}

describe('client disconnects: the upstream request is aborted, usage is kept', () => {
  it('non-streaming, before headers (the model is still thinking)', async () => {
    const before = keyRecord().usage.requests;
    const c = await send(chatBody('tag-ns-before [[sim firstTokenDelayMs=20000]]'));
    await upstreamFor('tag-ns-before');
    const rec = await disconnectAndAwaitCancel(c.socket, 'tag-ns-before');
    expect({ aborted: rec.aborted, completed: rec.completed }).toEqual({ aborted: true, completed: false });
    expect(keyRecord().usage.requests).toBe(before + 1);
  });

  it('non-streaming, after the upstream sent its headers (body still dripping)', async () => {
    const c = await send(chatBody('tag-ns-after [[sim fail=slow-drip tokensPerSecond=4 chunks=40]]'));
    const up = await upstreamFor('tag-ns-after');
    await eventually(() => Date.now() - up.startedAt > 300, 'upstream has begun its body');
    const rec = await disconnectAndAwaitCancel(c.socket, 'tag-ns-after');
    expect({ aborted: rec.aborted, completed: rec.completed }).toEqual({ aborted: true, completed: false });
  });

  it('streaming, before headers', async () => {
    const c = await send(chatBody('tag-s-before [[sim firstTokenDelayMs=20000]]', { stream: true }));
    await upstreamFor('tag-s-before');
    const rec = await disconnectAndAwaitCancel(c.socket, 'tag-s-before');
    expect({ aborted: rec.aborted, completed: rec.completed, chunksSent: rec.chunksSent }).toEqual({
      aborted: true,
      completed: false,
      chunksSent: 0,
    });
  });

  it('streaming, mid-stream: tokens relayed so far are counted', async () => {
    const before = { ...keyRecord().usage };
    const c = await send(chatBody('tag-s-mid [[sim tokensPerSecond=25 chunks=500]]', { stream: true }));
    await eventually(
      () => (c.received().match(/"content":"t\d+ "/g) ?? []).length >= 3,
      'three chunks reached the client',
    );
    const rec = await disconnectAndAwaitCancel(c.socket, 'tag-s-mid');
    expect({ aborted: rec.aborted, completed: rec.completed }).toEqual({ aborted: true, completed: false });
    expect(rec.chunksSent).toBeLessThan(500);
    const after = await eventually(
      () => (keyRecord().usage.completionTokens - before.completionTokens >= 3 ? keyRecord().usage : undefined),
      'usage counted',
    );
    expect(after.requests).toBe(before.requests + 1);
    expect(after.completionTokens - before.completionTokens).toBeLessThanOrEqual(rec.chunksSent);
  });
  // Disconnect while back-pressured: test/inproc/client-departure.test.ts
});

describe('clients that send badly', () => {
  it('a client that sends its body too slowly is cut off with 408, and nothing reaches the upstream', async () => {
    const seen = sim.requests.length;
    const c = await open();
    c.socket.write(`${head(200)}{"model":`);
    await c.closed;
    const text = c.received();
    expect(text.startsWith('HTTP/1.1 408 ')).toBe(true);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual(obError('request_timeout').toBody());
    expect(sim.requests.length).toBe(seen);
  });

  it('an oversized body with Content-Length is refused with 413 before it is sent', async () => {
    const c = await open();
    c.socket.write(head(50 * 1024 * 1024));
    await c.closed;
    const text = c.received();
    expect(text.startsWith('HTTP/1.1 413 ')).toBe(true);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual(
      obError('payload_too_large', {
        message:
          'The request body is larger than the proxy accepts (65536 bytes). Shorten the conversation or ask the operator to raise --body-limit.',
      }).toBody(),
    );
  });

  it('an oversized chunked body is refused with 413 once over the limit, not read to the end', async () => {
    const c = await open();
    c.socket.write(head('chunked'));
    const piece = 'x'.repeat(16 * 1024);
    let sent = 0;
    // Keep sending until the proxy answers; a proxy that read everything would take 50 MiB.
    while (c.received() === '' && sent < 50 * 1024 * 1024 && !c.socket.destroyed) {
      const ok = c.socket.write(`${piece.length.toString(16)}\r\n${piece}\r\n`);
      sent += piece.length;
      if (!ok)
        await new Promise((r) => {
          c.socket.once('drain', r);
          c.socket.once('close', r);
        });
    }
    await c.closed;
    expect(c.received().startsWith('HTTP/1.1 413 ')).toBe(true);
    expect(sent).toBeLessThan(8 * 1024 * 1024);
  });
});
