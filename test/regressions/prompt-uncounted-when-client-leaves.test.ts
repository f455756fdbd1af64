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
import { request as undiciRequest } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { MEDIA_TOKENS } from '../../src/wire/prompt-estimate.js';
import { chatRequests } from '../helpers/inproc.js';
import { noisePng } from '../helpers/png.js';
import {
  type Harness,
  MODEL,
  eventually,
  post,
  readyInstance,
  startHarness,
  startSim,
} from '../reliability/harness.js';

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
