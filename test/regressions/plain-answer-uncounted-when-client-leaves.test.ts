/**
 * Regression (a sibling of prompt-uncounted-when-client-leaves): a model server writes a plain
 * answer whole and sends it only when it is done, so a client that left while it was being written
 * had its completion counted as 0 tokens. A key could ask for long answers and hang up just before
 * each was done: the GPU wrote them all, and the key's tpm never saw one. Now such an answer is
 * charged the instance's recent pace (completion tokens per millisecond with the model server,
 * learned from its answers) times how long the request was with the model server. The daemon's
 * clock is the test's, so the times are exact and nothing sleeps.
 */
import { Writable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config-resolve.js';
import type { Simulator } from '../../simulator/simulator.js';
import { MODEL, TestClock, chatRequests, startSim } from '../helpers/inproc.js';
import { eventually, tmpHome } from '../reliability/harness.js';

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
