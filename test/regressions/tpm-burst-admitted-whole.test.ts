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
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { estimatePromptTokens } from '../../src/wire/prompt-estimate.js';
import { MODEL, TestClock } from '../helpers/inproc.js';
import { eventually } from '../helpers/processes.js';
import { tmpHome } from '../reliability/harness.js';

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
    expect([a.headers['retry-after'], a.headers['retry-after-ms'], a.headers['x-ratelimit-remaining-tokens']]).toEqual([
      '1',
      '1000',
      '0',
    ]);
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
