/**
 * Aliases on the request path (docs/contract.md §3b): a key of an instance accepts one of the
 * instance's aliases as `model` on every route, and the model server receives the instance's own
 * model id, the rest of the body as the client wrote it. Any other name is still refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance } from '../helpers/inproc-responses.js';

let d: Inproc;
let sim: Simulator;
let key: string;

beforeAll(async () => {
  d = await buildInproc();
  let url: string;
  ({ sim, url } = await startSim({ models: [MODEL] }));
  key = await readyInstance(d, 'gpu', url);
  const aliased = await d.manage('POST', '/v1/instances/gpu/aliases', { add: ['claude-sonnet-4-5', 'gpt-5'] });
  expect(aliased.status).toBe(200);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

async function send(url: string, body: Record<string, unknown>) {
  const before = sim.requests.length;
  const r = await d.daemon.dataPlane.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    payload: JSON.stringify(body),
  });
  return {
    status: r.statusCode,
    json: JSON.parse(r.body) as Record<string, unknown>,
    sent: sim.requests.slice(before),
  };
}

describe('an alias of the key’s instance', () => {
  it.each([
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], seed: 7 }],
    ['/v1/responses', { input: 'hi', max_output_tokens: 8 }],
    ['/v1/completions', { prompt: 'hi', max_tokens: 4 }],
    ['/v1/messages', { max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }],
  ])('%s: served, and the model server receives the instance’s model', async (url, rest) => {
    const r = await send(url, { model: 'claude-sonnet-4-5', ...rest });
    expect(r.status).toBe(200);
    expect(r.sent.map((q) => [q.path, q.body])).toEqual([[url, { ...rest, model: MODEL }]]);
  });

  it('any other name: 400 model_mismatch naming the model and its aliases, nothing sent', async () => {
    const r = await send('/v1/chat/completions', { model: 'llama3:70b', messages: [{ role: 'user', content: 'hi' }] });
    expect(r).toEqual({
      status: 400,
      json: {
        error: {
          message:
            'This API key is bound to a deployment of "gemma4:26b"; the request asked for "llama3:70b". Set model to "gemma4:26b" (or one of its aliases: "claude-sonnet-4-5", "gpt-5").',
          type: 'invalid_request_error',
          code: 'model_mismatch',
          param: 'model',
        },
      },
      sent: [],
    });
  });

  it('GET /v1/models/{alias} answers the instance’s model', async () => {
    const r = await d.daemon.dataPlane.inject({
      method: 'GET',
      url: '/v1/models/gpt-5',
      headers: { authorization: `Bearer ${key}` },
    });
    expect([r.statusCode, (r.json() as { id: string }).id]).toEqual([200, MODEL]);
  });
});
