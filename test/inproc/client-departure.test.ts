/**
 * A client that leaves or stops reading: the relay notices, the upstream is cancelled, and what
 * was used is counted. One describe per defect found, its story above it.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { Writable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { Deadlines } from '../../daemon/data-plane/deadlines.js';
import { PlainAnswer } from '../../daemon/data-plane/plain-relay.js';
import { StreamAnswer } from '../../daemon/data-plane/stream-relay.js';
import { Relay, type RelayContext } from '../../daemon/data-plane/upstream-relay.js';
import { UpstreamWatch } from '../../daemon/data-plane/upstream-watch.js';
import type { Simulator } from '../../simulator/simulator.js';
import { resolveConfig } from '../../src/config-resolve.js';
import type { KeyRecord } from '../../src/domain/key.js';
import type { RequestOutcome } from '../../src/services/usage.js';
import { DEFAULT_ANSWER_LIMITS } from '../../src/upstream/answer-limits.js';
import { UpstreamClient } from '../../src/upstream/upstream-client.js';
import { MEDIA_TOKENS } from '../../src/wire/prompt-estimate.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { chatRequests, MODEL, startSim, TestClock } from '../helpers/inproc.js';
import { noisePng } from '../helpers/png.js';
import {
  chatBody,
  eventually,
  expectedTokens,
  type Harness,
  MODEL as MODELOfHarness,
  post,
  readyInstance,
  setupReadyInstance,
  sseFrames,
  startHarness,
  startSim as startSimOfHarness,
  streamTokens,
  tmpHome,
  untilHeldBack,
} from '../reliability/harness.js';

/**
 * Regression: a relay learnt of its client's departure only from its
 * response's 'close' event, and that event comes once. A response that had closed before its
 * relay was made (its client gone between the body's end and the handler) was never told: the
 * request went to the model server, the instance's admission slot and the relay were held until
 * the answer or the response deadline, and the receipt counted a served request, not a
 * disconnect. A relay made on a closed response now takes its client as gone at once: nothing is
 * sent upstream, and the exchange is counted as a disconnect.
 *
 * The window is a turn of the event loop wide on the daemon's own paths, so it is opened here on
 * purpose: a real HTTP server makes the relay only once its response has closed.
 */
describe('a client gone before the relay starts sends nothing upstream', () => {
  let sim: Simulator;
  let simUrl: string;
  const upstream = new UpstreamClient({ connectTimeoutMs: 5_000 });
  const deadlines = new Deadlines();

  beforeAll(async () => {
    ({ sim, url: simUrl } = await startSim());
  });
  afterAll(async () => {
    await upstream.destroy();
    await sim.close();
  });

  interface Counted {
    prompt: number | null;
    completion: number | null;
    outcome: RequestOutcome;
  }

  /** A request whose client leaves as soon as it is sent; the relay is made once its response has closed. */
  async function relayAfterClientLeft(stream: boolean): Promise<{ counted: Counted[]; warnings: string[] }> {
    const counted: Counted[] = [];
    const warnings: string[] = [];
    let settled!: Promise<void>;
    const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
      settled = (async () => {
        await once(res, 'close');
        const c: RelayContext = {
          res,
          id: 'chatcmpl-test',
          model: MODEL,
          reqId: 'req-1',
          clock: { now: () => 0 },
          exchange: {
            ended: (prompt, completion, _counted, _reasoning, outcome) => {
              counted.push({ prompt, completion, outcome });
            },
          },
          limits: DEFAULT_ANSWER_LIMITS,
          deadlines,
          watch: new UpstreamWatch(),
          observer: null,
          log: { warn: (_o, msg) => warnings.push(msg) },
          instance: 'gpu-1',
          key: 'k1',
          routeMissing: null,
          resend: null,
        };
        const relay = new Relay(c, stream ? new StreamAnswer(new SseRelay(c.id, false, null)) : new PlainAnswer());
        upstream.dispatch(
          {
            endpoint: simUrl,
            body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream }),
            stream,
            requestId: 'req-1',
          },
          relay,
        );
        await relay.done;
      })();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const client = new AbortController();
    const sent = fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}', signal: client.signal }).catch(
      () => null,
    );
    // The server has the request once its handler ran; then the client leaves.
    while (settled === undefined) await new Promise((r) => setTimeout(r, 5));
    client.abort();
    await sent;
    await settled;
    server.close();
    return { counted, warnings };
  }

  it.each([false, true])(
    'stream %s: nothing reaches the model server, and the exchange is one disconnect',
    async (stream) => {
      const before = chatRequests(sim).length;
      const { counted, warnings } = await relayAfterClientLeft(stream);
      expect({ counted, warnings, upstream: chatRequests(sim).length - before }).toEqual({
        // The model server never had the prompt: nothing to charge for it, and nothing it answered.
        counted: [{ prompt: 0, completion: 0, outcome: 'disconnect' }],
        warnings: [],
        upstream: 0,
      });
    },
  );
});

/**
 * Regression (client faults): when a streaming client stopped reading, the relay waited
 * for 'drain'; if the client then went away, 'drain' never came and the handler hung for ever:
 * its usage was never counted, its log line never written, and its closure leaked.
 */
describe('a stream whose client leaves under backpressure ends and is counted', () => {
  const env = setupReadyInstance({ id: 'stuck' });

  function keyRecord(): KeyRecord {
    return [...env.h.daemon.ctx.lifecycle.registry.keys.values()][0] as KeyRecord;
  }

  it('a client that stops reading and then disconnects: upstream aborted, usage counted, handler finished', async () => {
    const before = { ...keyRecord().usage };
    const url = new URL(env.h.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    socket.on('error', () => {});
    await new Promise((r) => socket.once('connect', r));
    const body = JSON.stringify(chatBody('tag-stuck [[sim chunks=200000]]', { stream: true }));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${env.key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    socket.pause(); // read nothing: the proxy's writes back up
    const up = await eventually(
      () => env.sim.requests.find((r) => JSON.stringify(r.body).includes('tag-stuck')),
      'upstream request',
    );
    // The simulator stops sending once the proxy stops reading: wait for its count to settle.
    await untilHeldBack(up);
    expect(up.chunksSent).toBeLessThan(200_000);
    socket.destroy();
    await eventually(() => (up.endedAt !== null && up.aborted ? true : undefined), 'upstream aborted');
    // The handler ran to its end: it counted the tokens relayed and wrote its log line.
    await eventually(() => keyRecord().usage.completionTokens > before.completionTokens, 'usage counted');
    await eventually(
      () => env.h.logs.some((l) => l.msg === 'chat completion' && l.stream === true),
      'handler finished and logged',
    );
    expect(keyRecord().usage.requests).toBe(before.requests + 1);
  });
});

/**
 * Guard: the wait between a model server's reads is the relay's to time now, not
 * undici's. While a streaming client does not read, the relay pauses the upstream, and the
 * model server, held back, goes quiet: that silence is the client's doing, and must not end the
 * stream with upstream_timeout (undici's body time-out did not count a paused read either).
 */
describe('slow reader not upstream silence', () => {
  const IDLE_MS = 1_000;
  const CHUNKS = 60_000;
  const env = setupReadyInstance({ id: 'slow-reader', config: { idleTimeoutMs: IDLE_MS } });

  it('a client that stops reading for longer than the idle time still gets the whole stream', async () => {
    const url = new URL(env.h.baseUrl);
    const body = JSON.stringify(chatBody(`tag-slow [[sim chunks=${CHUNKS} tokensPerSecond=0]]`, { stream: true }));
    const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: Number(url.port),
          method: 'POST',
          path: '/v1/chat/completions',
          agent: false,
          headers: { authorization: `Bearer ${env.key}`, 'content-type': 'application/json' },
        },
        resolve,
      );
      req.on('error', reject);
      req.end(body);
    });
    res.pause(); // read nothing: the proxy's writes back up, and it pauses the model server
    expect(res.statusCode).toBe(200);
    const up = await eventually(
      () => env.sim.requests.find((r) => JSON.stringify(r.body).includes('tag-slow')),
      'upstream request',
    );
    await untilHeldBack(up);
    expect(up.chunksSent).toBeLessThan(CHUNKS);
    // Quiet for more than the idle time and the sweep's two periods (deadlines.ts), then read.
    await new Promise((r) => setTimeout(r, IDLE_MS + 1_000));
    expect(up.endedAt).toBeNull();
    res.setEncoding('utf8');
    let text = '';
    res.on('data', (s: string) => {
      text += s;
    });
    res.resume();
    await new Promise((r) => res.once('end', r));
    const frames = sseFrames(text);
    expect(frames.filter((f) => f.includes('"error"'))).toEqual([]);
    expect(streamTokens(frames)).toEqual(expectedTokens(CHUNKS));
    expect(frames.at(-1)).toBe('data: [DONE]');
  }, 30_000);
});

/**
 * Regression (a sibling of prompt-uncounted-when-client-leaves): a model server writes a plain
 * answer whole and sends it only when it is done, so a client that left while it was being written
 * had its completion counted as 0 tokens. A key could ask for long answers and hang up just before
 * each was done: the GPU wrote them all, and the key's tpm never saw one. Now such an answer is
 * charged the instance's recent pace (completion tokens per millisecond with the model server,
 * learned from its answers) times how long the request was with the model server. The daemon's
 * clock is the test's, so the times are exact and nothing sleeps.
 */
describe('a plain answer is charged when its client leaves', () => {
  const clock = new TestClock();
  let daemon: Daemon;
  let sim: Simulator;
  let secret: string;
  let keyId: string;

  beforeAll(async () => {
    const home = await tmpHome();
    const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' as const };
    const sink = new Writable({ write: (_c, _e, done) => done() });
    daemon = await startDaemon(config, { version: 'test', clock, logStream: sink });
    // Each answer takes the simulator a second of real time: long enough to move the daemon's clock
    // while the model server has the request.
    const s = await startSim({ chunks: 40, firstTokenDelayMs: 1000 });
    sim = s.sim;
    const lc = daemon.ctx.lifecycle;
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: s.url });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const created = await lc.createKey('gpu-1', 'renter', {});
    secret = created.secret;
    keyId = created.key.id;
  });
  afterAll(async () => {
    await daemon?.shutdown(0);
    await sim?.close();
  });

  const usage = (): { promptTokens: number; completionTokens: number; estimatedTokens: number; disconnects: number } =>
    daemon.ctx.lifecycle.registry.keys.get(keyId)!.usage;

  function send(signal?: AbortSignal, extra: Record<string, unknown> = {}): Promise<string> {
    return undiciRequest(`${daemon.ctx.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Write me a long story.' }], ...extra }),
      ...(signal === undefined ? {} : { signal }),
    }).then(
      (r) => r.body.text(),
      () => 'left',
    );
  }

  /** Resolves once the model server has one more chat request than `before`. */
  const upstreamHas = (before: number): Promise<unknown> =>
    eventually(() => chatRequests(sim).length > before, 'the model server has the request', 10_000);

  it("a plain answer left while it was written is charged the instance's pace times its time with the model server", async () => {
    // One whole answer teaches the pace: its 40 completion tokens in 4,000 ms of the daemon's clock.
    const whole = send();
    await upstreamHas(0);
    clock.advance(4000);
    const answer = JSON.parse(await whole) as { usage: { completion_tokens: number } };
    expect(answer.usage.completion_tokens).toBe(40);
    const before = { ...usage() };
    // The whole answer's counts were the model server's: nothing estimated.
    expect(before.estimatedTokens).toBe(0);

    // Left 3,000 ms into the next: 30 tokens written by then, at 0.01 a millisecond.
    const ac = new AbortController();
    const left = send(ac.signal);
    await upstreamHas(1);
    clock.advance(3000);
    ac.abort();
    expect(await left).toBe('left');
    await eventually(() => usage().disconnects === before.disconnects + 1, 'the disconnect counted', 10_000);
    expect(usage().completionTokens - before.completionTokens).toBe(30);
    // Its prompt as well (prompt-uncounted-when-client-leaves); both are estimates on the receipt.
    const prompt = usage().promptTokens - before.promptTokens;
    expect(prompt).toBeGreaterThan(0);
    expect(usage().estimatedTokens - before.estimatedTokens).toBe(prompt + 30);
  });

  it("never past the request's own max_tokens: a fast pace does not charge what the model could not write", async () => {
    // A fast answer moves the pace a fifth of the way: 0.01 + (40 / 50 - 0.01) / 5 = 0.168 a millisecond.
    const fast = send();
    await upstreamHas(2);
    clock.advance(50);
    expect((JSON.parse(await fast) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(40);
    const before = { ...usage() };

    // 3,000 ms at that pace is 504 tokens; the request asked for at most 10.
    const ac = new AbortController();
    const left = send(ac.signal, { max_tokens: 10 });
    await upstreamHas(3);
    clock.advance(3000);
    ac.abort();
    expect(await left).toBe('left');
    await eventually(() => usage().disconnects === before.disconnects + 1, 'the disconnect counted', 10_000);
    expect(usage().completionTokens - before.completionTokens).toBe(10);
  });
});

/**
 * Regression (accounting): a model server reports a prompt's
 * tokens only when its answer ends. A client that hung up before then (after the first token of a
 * stream, or while a plain answer was being written) had its prompt counted as 0 tokens, in its
 * usage and against its tpm: a key could send a long prompt, read one token and leave, again and
 * again, and the GPU's prefill never counted against it. Now a prompt the model server had but
 * never counted is charged an estimate (prompt-estimate.ts: four characters of the request per
 * token, an image part 256 tokens whatever its size); a model server that refused the request, or
 * was never reached, read no prompt, and nothing is charged.
 */
describe('a prompt is charged an estimate when its client leaves', () => {
  const startSim = startSimOfHarness;
  const MODEL = MODELOfHarness;
  let h: Harness;
  let sim: Simulator;
  let defaultKey: string;
  let limited: { secret: string; id: string };
  const TPM = 2000;

  beforeAll(async () => {
    h = await startHarness();
    // Ten tokens a second over 100 chunks: a stream's usage chunk, and a plain answer, come 10 s on.
    const s = await startSim({ chunks: 100, tokensPerSecond: 10 });
    sim = s.sim;
    defaultKey = await readyInstance(h, 'gpu-1', s.url);
    const created = await h.daemon.ctx.lifecycle.createKey('gpu-1', 'renter', { tpm: TPM });
    limited = { secret: created.secret, id: created.key.id };
  });
  afterAll(async () => {
    await h?.stop();
    await sim?.close();
  });

  function usageOf(keyId: string): {
    promptTokens: number;
    completionTokens: number;
    estimatedTokens: number;
    errors: number;
    disconnects: number;
  } {
    return h.daemon.ctx.lifecycle.registry.keys.get(keyId)!.usage;
  }

  function defaultKeyId(): string {
    for (const k of h.daemon.ctx.lifecycle.registry.keys.values()) if (k.isDefault) return k.id;
    throw new Error('no default key');
  }

  /** Sends `body` as written, and hangs up once `leave` says so; resolves when it has. */
  async function sendAndLeave(secret: string, body: string, leave: (firstBytes: Buffer) => boolean): Promise<void> {
    const ac = new AbortController();
    const res = await undiciRequest(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
      body,
      signal: ac.signal,
    });
    expect(res.statusCode).toBe(200);
    try {
      for await (const chunk of res.body) if (leave(chunk as Buffer)) break;
    } catch {
      // aborted
    }
    ac.abort();
  }

  it('a stream left after its first token: the prompt is charged its estimate, and counts against the tpm', async () => {
    const prompt = 'Summarise this. '.repeat(1250); // 20,000 characters
    // include_usage given: the body goes upstream byte for byte, so its length is the client's.
    const body = JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: prompt }],
      stream: true,
      stream_options: { include_usage: true },
    });
    await sendAndLeave(limited.secret, body, (b) => b.includes('"content"'));
    await eventually(() => usageOf(limited.id).disconnects === 1, 'the disconnect counted', 10_000);
    const u = usageOf(limited.id);
    expect(u.promptTokens).toBe(Math.ceil(Buffer.byteLength(body) / 4));
    expect(u.completionTokens).toBeGreaterThanOrEqual(1);
    expect(u.completionTokens).toBeLessThan(100);
    // Neither was reported by the model server: the receipt says both are estimates (the
    // completion is the content events relayed).
    expect(u.estimatedTokens).toBe(u.promptTokens + u.completionTokens);
    // The upstream request was aborted, not read to its end.
    await eventually(() => chatRequests(sim).at(-1)?.aborted === true, 'the upstream request aborted', 10_000);

    // 5,000 tokens against a tpm of 2,000: the key waits, where before it went on at no cost.
    const next = await post(h.baseUrl, limited.secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    expect(next.status).toBe(429);
    expect((next.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'rate_limited',
      message: expect.stringContaining('tokens per minute') as unknown,
    });
    expect(Number(next.headers['retry-after'])).toBeGreaterThan(60);
  });

  it('a plain request left while the model server writes: the prompt is charged, an image as 256 tokens', async () => {
    const keyId = defaultKeyId();
    const before = { ...usageOf(keyId) };
    const url = `data:image/png;base64,${noisePng(300).toString('base64')}`;
    expect(url.length).toBeGreaterThan(4096);
    const body = JSON.stringify({
      model: MODEL,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image_url', image_url: { url } },
          ],
        },
      ],
    });
    const sent = chatRequests(sim).length;
    const ac = new AbortController();
    const pending = undiciRequest(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${defaultKey}` },
      body,
      signal: ac.signal,
    }).catch(() => null);
    // Left once the model server has the request (its answer is 10 s away).
    await eventually(() => chatRequests(sim).length > sent, 'the model server has the request', 10_000);
    ac.abort();
    await pending;
    await eventually(() => usageOf(keyId).disconnects === before.disconnects + 1, 'the disconnect counted', 10_000);
    const u = usageOf(keyId);
    const estimate = Math.ceil((Buffer.byteLength(body) - url.length) / 4) + MEDIA_TOKENS;
    expect(u.promptTokens - before.promptTokens).toBe(estimate);
    expect(u.completionTokens - before.completionTokens).toBe(0);
    expect(u.estimatedTokens - before.estimatedTokens).toBe(estimate);
    // Far below what the image's bytes would have made of it.
    expect(estimate).toBeLessThan(url.length / 40);
  });

  it('a request the model server refused read no prompt: nothing is charged', async () => {
    const keyId = defaultKeyId();
    const before = { ...usageOf(keyId) };
    // Ollama refuses image URLs it would have to fetch (400), as the simulator does.
    const refused = await post(h.baseUrl, defaultKey, {
      model: MODEL,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://example.com/cat.png' } }] }],
    });
    expect(refused.status).toBe(400);
    const u = usageOf(keyId);
    expect([u.promptTokens, u.completionTokens, u.estimatedTokens, u.errors]).toEqual([
      before.promptTokens,
      before.completionTokens,
      before.estimatedTokens,
      before.errors + 1,
    ]);
  });
});
