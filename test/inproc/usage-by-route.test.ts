/**
 * The data plane splits each key's usage by the client API a request came through (KeyUsage.byRoute):
 * requests counted when sent, tokens when the exchange ends, on chat completions, Responses,
 * legacy completions and Messages alike; the totals are the sum of the split; the management
 * API's usage answer and the key listing carry it, and the store has it after the flush at
 * shutdown. The model server's own usage figures are what each route is charged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import type { KeyUsage } from '../../src/domain/key.js';
import type { UsageReport } from '../../src/wire/usage-report.js';
import { type Answer, type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let key: { id: string; secret: string };
let other: { id: string; secret: string };

async function post(path: string, secret: string, body: unknown): Promise<Answer> {
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: path,
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${secret}`,
      'anthropic-version': '2023-06-01',
    },
    payload: JSON.stringify(body),
  });
  let json: unknown = null;
  try {
    json = JSON.parse(res.body);
  } catch {
    // A stream.
  }
  return { status: res.statusCode, headers: res.headers, json, text: res.body };
}

type Usage = Record<string, number>;
const usageOf = (a: Answer): Usage => (a.json as { usage: Usage }).usage;

beforeAll(async () => {
  d = await buildInproc();
  let url: string;
  ({ sim, url } = await startSim());
  expect((await d.manage('POST', '/v1/instances', { id: 'gpu-1', model: MODEL, endpoint: url })).status).toBe(201);
  key = ((await d.manage('POST', '/v1/instances/gpu-1/ready', { probe: false })).json as { defaultKey: typeof key })
    .defaultKey;
  other = (await d.manage('POST', '/v1/keys', { instance: 'gpu-1', name: 'other' })).json as typeof other;
});

afterAll(async () => {
  await sim?.close();
});

describe('usage by route', () => {
  const split: Record<string, { requests: number; promptTokens: number; completionTokens: number }> = {};
  const charge = (route: string, prompt: number, completion: number): void => {
    const r = (split[route] ??= { requests: 0, promptTokens: 0, completionTokens: 0 });
    r.requests += 1;
    r.promptTokens += prompt;
    r.completionTokens += completion;
  };

  it('each route charges its own requests and tokens; the totals are their sum', async () => {
    const hi = [{ role: 'user', content: 'hello there' }];
    for (const content of ['one', 'one two three']) {
      const a = await post('/v1/chat/completions', key.secret, { model: MODEL, messages: [{ role: 'user', content }] });
      expect(a.status).toBe(200);
      charge('chat', usageOf(a).prompt_tokens!, usageOf(a).completion_tokens!);
    }
    const resp = await post('/v1/responses', key.secret, { model: MODEL, input: 'Say hello' });
    expect(resp.status).toBe(200);
    charge('responses', usageOf(resp).input_tokens!, usageOf(resp).output_tokens!);
    const cmpl = await post('/v1/completions', key.secret, { model: MODEL, prompt: 'def f():', max_tokens: 16 });
    expect(cmpl.status).toBe(200);
    charge('completions', usageOf(cmpl).prompt_tokens!, usageOf(cmpl).completion_tokens!);
    const msg = await post('/v1/messages', key.secret, { model: MODEL, max_tokens: 64, messages: hi });
    expect(msg.status).toBe(200);
    charge('messages', usageOf(msg).input_tokens!, usageOf(msg).output_tokens!);
    // An error from the model server: a request sent, no tokens charged.
    const failed = await post('/v1/messages', key.secret, {
      model: MODEL,
      max_tokens: 64,
      messages: [{ role: 'user', content: '[[sim fail=http-error]]' }],
    });
    expect(failed.status).toBe(500);
    charge('messages', 0, 0);
    // Refused before it was sent (the wrong model): not a request of any route.
    expect((await post('/v1/responses', key.secret, { model: 'qwen3.6:27b', input: 'x' })).status).toBe(400);
    // Another key's requests are its own.
    expect((await post('/v1/responses', other.secret, { model: MODEL, input: 'x' })).status).toBe(200);

    for (const r of Object.values(split)) expect(r.promptTokens + r.completionTokens).toBeGreaterThan(0);
    const usage = d.daemon.ctx.lifecycle.registry.keys.get(key.id)!.usage;
    expect(usage.byRoute).toEqual(split);
    const sum = (f: 'requests' | 'promptTokens' | 'completionTokens'): number =>
      Object.values(split).reduce((n, r) => n + r[f], 0);
    expect(usage).toMatchObject({
      requests: sum('requests'),
      promptTokens: sum('promptTokens'),
      completionTokens: sum('completionTokens'),
      errors: 1,
    });
    expect(Object.keys(d.daemon.ctx.lifecycle.registry.keys.get(other.id)!.usage.byRoute)).toEqual(['responses']);
  });

  it('the management API answers the split per key and per pack, in report order, and keys list has it', async () => {
    const report = (await d.manage('GET', '/v1/usage?instance=gpu-1')).json as UsageReport;
    const [pack] = report.packs;
    const row = pack!.keys.find((k) => k.id === key.id)!;
    expect(row.byRoute).toEqual(split);
    expect(Object.keys(row.byRoute)).toEqual(['chat', 'responses', 'completions', 'messages']);
    const otherSplit = pack!.keys.find((k) => k.id === other.id)!.byRoute;
    expect(pack!.total.byRoute).toEqual({
      ...split,
      responses: {
        requests: split.responses!.requests + otherSplit.responses!.requests,
        promptTokens: split.responses!.promptTokens + otherSplit.responses!.promptTokens,
        completionTokens: split.responses!.completionTokens + otherSplit.responses!.completionTokens,
      },
    });
    const listed = (await d.manage('GET', '/v1/keys?instance=gpu-1')).json as { id: string; usage: KeyUsage }[];
    expect(listed.find((k) => k.id === key.id)!.usage.byRoute).toEqual(split);
  });

  it('the flush at shutdown writes the split to the store', async () => {
    await d.close();
    const stored = (await d.store.load()).keys.find((k) => k.id === key.id)!;
    expect(stored.usage.byRoute).toEqual(split);
  });
});
