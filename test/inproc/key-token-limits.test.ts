/**
 * A key's tokens per minute, charged as requests are admitted and as answers end, and what a
 * request is charged for. One describe per defect found, its story above it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { request, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import type { Simulator } from '../../simulator/simulator.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { estimatePromptTokens } from '../../src/wire/prompt-estimate.js';
import { chatRequests, MODEL, startSim, TestClock } from '../helpers/inproc.js';
import { eventually } from '../helpers/processes.js';
import { chatBody, post, tmpHome } from '../reliability/harness.js';

/**
 * Regression: tokens were counted against a key's tpm
 * only when answers ended, so every request of a burst was admitted before any was charged: a key
 * with `--tpm 100` and no concurrency limit sent 200 requests at once, all were admitted, and the
 * key took 102 times its tpm in one window. Now each request reserves its prompt's estimate plus
 * its completion's cap (a long answer's worth when it sets none) once its body is read, and a key
 * at its tpm, counting those reservations, is refused: a burst gets what its reservations fit in
 * the tpm, and each answer's real usage replaces its reservation when it ends.
 * The model server holds every answer until all requests are in, so they are surely at once.
 */
describe('a tpm burst is admitted by its reservations', () => {
  const TPM = 100;
  const BURST = 200;
  const CAP = 10;
  const USAGE = { prompt_tokens: 20, completion_tokens: CAP, total_tokens: 20 + CAP };
  const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'burst' }], max_tokens: CAP });
  /** What each request reserves: its prompt's estimate and its cap. */
  const RESERVED = estimatePromptTokens(Buffer.byteLength(body), { parts: 0, chars: 0 }) + CAP;
  /** Admitted while the key is under its tpm: the last one may reserve past it. */
  const ADMITTED = Math.ceil(TPM / RESERVED);

  const clock = new TestClock();
  let daemon: Daemon;
  let upstream: Server;
  const held: ServerResponse[] = [];
  let secret: string;
  let keyId: string;

  function answer(res: ServerResponse): void {
    const out = JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage: USAGE,
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
    res.end(out);
  }

  beforeAll(async () => {
    upstream = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
        return;
      }
      req.resume();
      req.on('end', () => held.push(res));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const home = await tmpHome();
    const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' as const };
    const sink = new Writable({ write: (_c, _e, done) => done() });
    daemon = await startDaemon(config, { version: 'test', clock, logStream: sink });
    const lc = daemon.ctx.lifecycle;
    await lc.addInstance({
      id: 'gpu-1',
      model: MODEL,
      endpoint: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const created = await lc.createKey('gpu-1', 'renter', { tpm: TPM });
    secret = created.secret;
    keyId = created.key.id;
  });
  afterAll(async () => {
    for (const res of held.splice(0)) answer(res);
    await daemon?.shutdown(0);
    await new Promise((r) => upstream?.close(r));
  });

  interface Answer {
    status: number;
    headers: Record<string, unknown>;
    json: unknown;
  }

  function post(): Promise<Answer> {
    return request(`${daemon.ctx.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
      body,
    }).then(async (r) => ({ status: r.statusCode, headers: r.headers, json: await r.body.json() }));
  }

  it('a burst of requests at once is bounded by the tokens they reserve, not admitted whole', async () => {
    expect(ADMITTED).toBeLessThan(BURST);
    const answers = Array.from({ length: BURST }, () => post());
    const settled: Answer[] = [];
    for (const a of answers) void a.then((x) => settled.push(x));
    // Every request is either with the model server (held there) or answered.
    await eventually(() => held.length + settled.length === BURST, 'every request admitted or refused', 30_000);
    expect(held).toHaveLength(ADMITTED);
    expect(settled).toHaveLength(BURST - ADMITTED);
    for (const a of settled) {
      expect(a.status).toBe(429);
      expect(a.json).toEqual({
        error: {
          message: `This API key is over its limit of ${TPM} tokens per minute (tpm). Retry in 1 s; the operator sets it with \`ob-proxy keys limit\`.`,
          type: 'rate_limit_error',
          code: 'rate_limited',
          param: null,
        },
      });
      // Nothing is charged yet: the reservations of the answers under way are what refuse it, and
      // they are given back as those answers end, so the wait is short.
      expect([
        a.headers['retry-after'],
        a.headers['retry-after-ms'],
        a.headers['x-ratelimit-remaining-tokens'],
      ]).toEqual(['1', '1000', '0']);
    }

    // The answers end: each one's usage replaces its reservation.
    for (const res of held.splice(0)) answer(res);
    const served = (await Promise.all(answers)).filter((a) => a.status === 200);
    expect(served).toHaveLength(ADMITTED);
    const usage = daemon.ctx.lifecycle.registry.keys.get(keyId)!.usage;
    expect([usage.requests, usage.promptTokens + usage.completionTokens]).toEqual([
      ADMITTED,
      ADMITTED * USAGE.total_tokens,
    ]);
    // In the window: at most the tpm, and the last answer's reservation past it.
    expect(ADMITTED * USAGE.total_tokens).toBeLessThanOrEqual(TPM + RESERVED);
  });
});

/**
 * Regression (accounting and limits): tokens are known only when an answer
 * ends, so a key's tpm was checked against the tokens of answers already over, and whatever an
 * answer took past the limit was forgotten when the window ended. A key with `--tpm 30` that opened
 * eight streams at once (each admitted: nothing was charged yet) got 96 tokens in one window, was
 * told to retry when that window ended, and was then served as if it had used nothing: repeated
 * every window, the key's rate was its concurrency times its answers, whatever its tpm.
 * Now the tokens charged over the limit are carried into the next windows (each window pays off
 * one tpm): the key is refused until it is back under its tpm, with a Retry-After that tells when,
 * and over any span it gets no more than its tpm per window plus one burst.
 * A burst is now bounded by the tokens its requests reserve (tpm-burst-admitted-whole.test.ts), so
 * the overrun here is one answer longer than its key's whole tpm: the same carry pays it off.
 */
describe('tokens past the tpm are carried into the next windows', () => {
  const WINDOW_MS = 60_000;
  const TPM = 30;
  const CHUNKS = 100;
  let daemon: Daemon;
  let sim: Simulator;
  let secret: string;
  let keyId: string;
  const clock = new TestClock();

  beforeAll(async () => {
    const home = await tmpHome();
    const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' as const };
    const sink = new Writable({ write: (_c, _e, done) => done() });
    daemon = await startDaemon(config, { version: 'test', clock, logStream: sink });
    const s = await startSim({ chunks: CHUNKS });
    sim = s.sim;
    const lc = daemon.ctx.lifecycle;
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: s.url });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const created = await lc.createKey('gpu-1', 'renter', { tpm: TPM });
    secret = created.secret;
    keyId = created.key.id;
  });
  afterAll(async () => {
    await daemon?.shutdown(0);
    await sim?.close();
  });

  it('tokens over the tpm are carried into the next windows: the key waits until it has paid them off', async () => {
    const client = new OpenAI({ apiKey: secret, baseURL: `${daemon.ctx.baseUrl}/v1`, maxRetries: 0 });
    // One stream, admitted with nothing charged yet: it reserved what was left of the tpm, and
    // the model server wrote more than that (no cap was asked).
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'burst 0' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    const usage = daemon.ctx.lifecycle.registry.keys.get(keyId)!.usage;
    const used = usage.promptTokens + usage.completionTokens;
    expect(used).toBe(2 + CHUNKS);
    // 102 tokens against a tpm of 30: three windows' worth past this one.
    const windows = Math.floor(used / TPM);
    expect(windows).toBe(3);

    const refused = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
    expect(refused.status).toBe(429);
    expect((refused.json as { error: { code: string } }).error.code).toBe('rate_limited');
    // The whole wait, not only the end of this window.
    expect(refused.headers['retry-after-ms']).toBe(String(windows * WINDOW_MS));
    expect(refused.headers['retry-after']).toBe(String(windows * 60));

    // One window later the key is still 72 tokens in: refused, told the rest of the wait.
    clock.advance(WINDOW_MS);
    const still = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
    expect([still.status, still.headers['retry-after-ms'], still.headers['x-ratelimit-remaining-tokens']]).toEqual([
      429,
      String((windows - 1) * WINDOW_MS),
      '0',
    ]);
    // Just before the wait is over: refused; at its end: served. The carried 12 tokens are in its
    // window, and the answer (no cap) reserved the 18 left while it was written.
    clock.advance((windows - 1) * WINDOW_MS - 1);
    const early = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
    expect([early.status, early.headers['x-ratelimit-remaining-tokens']]).toEqual([429, '0']);
    clock.advance(1);
    const served = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
    expect([served.status, served.headers['x-ratelimit-remaining-tokens']]).toEqual([200, '0']);
    expect(used % TPM).toBe(12);
    expect(sim.requests.filter((r) => r.path === '/v1/chat/completions').length).toBe(2);
  });
});

/**
 * Regression: vLLM, like OpenAI, gives
 * max_completion_tokens precedence over the deprecated max_tokens, but the proxy took max_tokens
 * as the cap whenever both were given, and forwarded both. A client sent `max_tokens: 1` with
 * `max_completion_tokens: 400` and hung up just before the plain answer ended: vLLM wrote 3,039
 * tokens, the proxy charged the estimate capped at 1, and --tpm never refused the key. Now the
 * cap is read as vLLM and OpenAI read it, and only that cap goes upstream (as max_tokens, the one
 * field Ollama reads too), so what the model server writes is what the proxy checks and charges.
 * The simulator speaks as vLLM here (it honours max_completion_tokens first); the daemon's clock
 * is the test's, so the times are exact.
 */
describe('the completion cap is read as vLLM and OpenAI read it', () => {
  const clock = new TestClock();
  const TPM = 40;
  let daemon: Daemon;
  let sim: Simulator;
  let learner: string;
  let renter: { secret: string; id: string };

  beforeAll(async () => {
    const home = await tmpHome();
    const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' as const };
    const sink = new Writable({ write: (_c, _e, done) => done() });
    daemon = await startDaemon(config, { version: 'test', clock, logStream: sink });
    const s = await startSim({ chunks: 40, firstTokenDelayMs: 1000, flavor: 'vllm' });
    sim = s.sim;
    const lc = daemon.ctx.lifecycle;
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: s.url });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    learner = (await lc.createKey('gpu-1', 'learner', {})).secret;
    const created = await lc.createKey('gpu-1', 'renter', { tpm: TPM });
    renter = { secret: created.secret, id: created.key.id };
  });
  afterAll(async () => {
    await daemon?.shutdown(0);
    await sim?.close();
  });

  function send(
    secret: string,
    extra: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: string }> {
    return undiciRequest(`${daemon.ctx.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Write.' }], ...extra }),
      ...(signal === undefined ? {} : { signal }),
    }).then(
      async (r) => ({ status: r.statusCode, body: await r.body.text() }),
      () => ({ status: 0, body: 'left' }),
    );
  }

  const upstreamHas = (before: number): Promise<unknown> =>
    eventually(() => chatRequests(sim).length > before, 'the model server has the request', 10_000);

  it('max_completion_tokens wins over max_tokens: forwarded alone, and the charge follows it', async () => {
    // One whole answer teaches the instance's pace: 40 completion tokens in 4,000 ms.
    const whole = send(learner, {});
    await upstreamHas(0);
    clock.advance(4000);
    expect((JSON.parse((await whole).body) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(
      40,
    );

    // max_tokens 1, max_completion_tokens 400, left 3,000 ms in: 30 tokens written by then.
    const ac = new AbortController();
    const left = send(renter.secret, { max_tokens: 1, max_completion_tokens: 400 }, ac.signal);
    await upstreamHas(1);
    // What the model server was sent: the cap the proxy reads, in the one field every server reads.
    const sent = chatRequests(sim)[1]!.body as Record<string, unknown>;
    expect(sent).toEqual({ model: MODEL, messages: [{ role: 'user', content: 'Write.' }], max_tokens: 400 });
    clock.advance(3000);
    ac.abort();
    expect((await left).body).toBe('left');
    const usage = () => daemon.ctx.lifecycle.registry.keys.get(renter.id)!.usage;
    await eventually(() => usage().disconnects === 1, 'the disconnect counted', 10_000);
    expect(usage().completionTokens).toBe(30);
    const prompt = usage().promptTokens;
    // The prompt alone is under the tpm: only the completion, charged in full, takes the key over.
    expect(prompt).toBeLessThan(TPM - 1);
    expect(usage().estimatedTokens).toBe(prompt + 30);

    const refused = await send(renter.secret, { max_tokens: 1 });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toEqual({
      error: {
        message: `This API key is over its limit of ${TPM} tokens per minute (tpm). Retry in 60 s; the operator sets it with \`ob-proxy keys limit\`.`,
        type: 'rate_limit_error',
        code: 'rate_limited',
        param: null,
      },
    });
    expect(chatRequests(sim)).toHaveLength(2);
  });
});
