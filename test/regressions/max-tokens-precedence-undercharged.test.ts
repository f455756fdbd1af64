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
import { Writable } from 'node:stream';
import { request as undiciRequest } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config-resolve.js';
import type { Simulator } from '../../simulator/simulator.js';
import { MODEL, TestClock, chatRequests, startSim } from '../helpers/inproc.js';
import { eventually, tmpHome } from '../reliability/harness.js';

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
  expect((JSON.parse((await whole).body) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(40);

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
