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
 */
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config.js';
import type { Simulator } from '../../simulator/simulator.js';
import { MODEL, TestClock, startSim } from '../helpers/inproc.js';
import { chatBody, post, tmpHome } from '../reliability/harness.js';

const WINDOW_MS = 60_000;
const TPM = 30;
const BURST = 8;
let daemon: Daemon;
let sim: Simulator;
let gate: Server;
let secret: string;
let keyId: string;
const clock = new TestClock();

beforeAll(async () => {
  const home = await tmpHome();
  const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' as const };
  const sink = new Writable({ write: (_c, _e, done) => done() });
  daemon = await startDaemon(config, { version: 'test', clock, logStream: sink });
  const s = await startSim({ chunks: 10 });
  sim = s.sim;
  // In front of the simulator: the first BURST chat requests are held until all of them are in,
  // so that they are surely in flight together (no timing), then each is passed on.
  const held: (() => void)[] = [];
  let seen = 0;
  gate = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const pass = (): void => {
        void fetch(`${s.url}${req.url ?? ''}`, {
          method: req.method ?? 'GET',
          headers: { 'content-type': 'application/json' },
          ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
        }).then(async (r) => {
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await r.arrayBuffer()));
        });
      };
      if (req.url !== '/v1/chat/completions' || ++seen > BURST) return pass();
      held.push(pass);
      if (held.length === BURST) for (const p of held.splice(0)) p();
    });
  });
  await new Promise<void>((r) => gate.listen(0, '127.0.0.1', r));
  const gateUrl = `http://127.0.0.1:${(gate.address() as AddressInfo).port}`;
  const lc = daemon.ctx.lifecycle;
  await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: gateUrl });
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
  gate?.close();
});

it('tokens over the tpm are carried into the next windows: the key waits until it has paid them off', async () => {
  const client = new OpenAI({ apiKey: secret, baseURL: `${daemon.ctx.baseUrl}/v1`, maxRetries: 0 });
  // Eight streams at once, each admitted while nothing is charged yet.
  const texts = await Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `burst ${i}` }],
        stream: true,
      });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      return text;
    }),
  );
  expect(texts.every((t) => t.length > 0)).toBe(true);
  const usage = daemon.ctx.lifecycle.registry.keys.get(keyId)!.usage;
  const used = usage.promptTokens + usage.completionTokens;
  expect(used).toBe(8 * (2 + 10));
  // 96 tokens against a tpm of 30: three windows' worth past this one.
  const windows = Math.floor(used / TPM);
  expect(windows).toBe(3);

  const refused = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
  expect(refused.status).toBe(429);
  expect((refused.json as { error: { code: string } }).error.code).toBe('rate_limited');
  // The whole wait, not only the end of this window.
  expect(refused.headers['retry-after-ms']).toBe(String(windows * WINDOW_MS));
  expect(refused.headers['retry-after']).toBe(String(windows * 60));

  // One window later the key is still 66 tokens in: refused, told the rest of the wait.
  clock.advance(WINDOW_MS);
  const still = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
  expect([still.status, still.headers['retry-after-ms'], still.headers['x-ratelimit-remaining-tokens']]).toEqual([
    429,
    String((windows - 1) * WINDOW_MS),
    '0',
  ]);
  // Just before the wait is over: refused; at its end: served, and the carried 6 tokens show.
  clock.advance((windows - 1) * WINDOW_MS - 1);
  expect((await post(daemon.ctx.baseUrl, secret, chatBody('next'))).status).toBe(429);
  clock.advance(1);
  const served = await post(daemon.ctx.baseUrl, secret, chatBody('next'));
  expect([served.status, served.headers['x-ratelimit-remaining-tokens']]).toEqual([200, String(TPM - (used % TPM))]);
  expect(sim.requests.filter((r) => r.path === '/v1/chat/completions').length).toBe(9);
});
