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
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config-resolve.js';
import type { Simulator } from '../../simulator/simulator.js';
import { MODEL, TestClock, startSim } from '../helpers/inproc.js';
import { chatBody, post, tmpHome } from '../reliability/harness.js';

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
