/**
 * Ollama's own client, the `ollama` npm package, unchanged, against a daemon built in process
 * and listening on 127.0.0.1:0, in front of the simulator speaking Ollama's API
 * (docs/compatibility.md, "Ollama's own API"): the key as `Authorization: Bearer` in its
 * `headers`, the gateway's base URL as its `host`. It chats and generates plain and streamed,
 * embeds, lists, shows and asks the version as it would of Ollama; another model, no key, a revoked
 * key, `pull` and `delete` are refused with the status and message it raises. What the model
 * server received is asserted: the body as the client sent it (an alias as the model), never the
 * client's key; and the key's usage counts each native request under its route.
 */
import { Ollama } from 'ollama';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RecordedRequest, Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let base: string;
let key: string;
let stopped: string;

const received = (path: string): RecordedRequest[] => sim.requests.filter((r) => r.path === path);
const client = (secret: string | null = key): Ollama =>
  new Ollama({ host: base, headers: secret === null ? {} : { Authorization: `Bearer ${secret}` } });
/** What ollama-js raised: its ResponseError's status and message. */
const raised = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => 'not refused',
    (e: { status_code?: number; message: string }) => ({ status: e.status_code, message: e.message }),
  );

const CREATED = expect.any(String);
const COUNTS = {
  total_duration: expect.any(Number),
  load_duration: expect.any(Number),
  prompt_eval_duration: expect.any(Number),
  eval_duration: expect.any(Number),
};

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simUrl } = await startSim({ models: [MODEL, 'qwen3.6:27b'], chunks: 3 }));
  await d.daemon.listen();
  base = d.daemon.ctx.baseUrl;
  const ready = async (id: string): Promise<string> => {
    expect((await d.manage('POST', '/v1/instances', { id, model: MODEL, endpoint: simUrl })).status).toBe(201);
    const r = await d.manage('POST', `/v1/instances/${id}/ready`, { probe: false });
    return (r.json as { defaultKey: { secret: string } }).defaultKey.secret;
  };
  key = await ready('gpu');
  stopped = await ready('old');
  await d.manage('POST', '/v1/instances/old/stop', {});
  expect((await d.manage('POST', '/v1/instances/gpu/aliases', { add: ['house'] })).status).toBe(200);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

beforeEach(async () => {
  await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
});

describe('ollama-js through the gateway', () => {
  it('chat, plain: Ollama’s answer as it came; the body as sent, without the client’s key', async () => {
    const r = await client().chat({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hi' }],
      options: { seed: 1 },
    });
    expect(r).toEqual({
      model: MODEL,
      created_at: CREATED,
      message: { role: 'assistant', content: 't0 t1 t2 ' },
      done: true,
      done_reason: 'stop',
      prompt_eval_count: 2,
      eval_count: 3,
      ...COUNTS,
    });
    const [up] = received('/api/chat');
    expect(up!.body).toEqual({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hi' }],
      options: { seed: 1 },
      stream: false,
    });
    expect(up!.headers.authorization).toBeUndefined();
  });

  it('chat, streamed: each part as Ollama wrote it, the last with done and the counts', async () => {
    const parts = [];
    for await (const p of await client().chat({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    }))
      parts.push(p);
    expect(parts.map((p) => [p.message.content, p.done])).toEqual([
      ['t0 ', false],
      ['t1 ', false],
      ['t2 ', false],
      ['', true],
    ]);
    expect(parts[3]).toMatchObject({ done_reason: 'stop', prompt_eval_count: 1, eval_count: 3 });
  });

  it('generate, plain and streamed, an alias sent as the model, num_predict honoured', async () => {
    const plain = await client().generate({ model: 'house', prompt: 'Once upon', options: { num_predict: 2 } });
    expect(plain).toMatchObject({ model: MODEL, response: 't0 t1 ', done: true, done_reason: 'length', eval_count: 2 });
    expect(received('/api/generate')[0]!.body).toEqual({
      model: MODEL,
      prompt: 'Once upon',
      options: { num_predict: 2 },
      stream: false,
    });
    let text = '';
    for await (const p of await client().generate({ model: MODEL, prompt: 'Once', stream: true })) text += p.response;
    expect(text).toBe('t0 t1 t2 ');
  });

  it('embed, list, ps, show and version: the key’s model alone, as Ollama answers', async () => {
    const e = await client().embed({ model: MODEL, input: ['a b', 'c'] });
    expect(e).toMatchObject({ model: MODEL, prompt_eval_count: 3 });
    expect(e.embeddings).toHaveLength(2);
    // The model server has two models; the key sees its own.
    expect((await client().list()).models.map((m) => m.name)).toEqual([MODEL]);
    expect((await client().ps()).models.map((m) => m.name)).toEqual([MODEL]);
    const card = await client().show({ model: 'house' });
    expect(Object.keys(card)).toEqual([
      'modelfile',
      'template',
      'details',
      'model_info',
      'tensors',
      'capabilities',
      'modified_at',
    ]);
    expect(received('/api/show')[0]!.body).toEqual({ model: MODEL });
    expect(await client().version()).toEqual({ version: '0.33.0-sim' });
    expect(sim.requests.filter((r) => r.headers.authorization !== undefined)).toEqual([]);
  });

  it('another model, no key, a revoked key, pull and delete: refused, with what ollama-js raises, nothing sent', async () => {
    expect(await raised(client().chat({ model: 'qwen3.6:27b', messages: [{ role: 'user', content: 'x' }] }))).toEqual({
      status: 400,
      message:
        'This API key is bound to a deployment of "gemma4:26b"; the request asked for "qwen3.6:27b". Set model to "gemma4:26b" (or one of its aliases: "house").',
    });
    expect(await raised(client().show({ model: 'qwen3.6:27b' }))).toEqual({
      status: 404,
      message: 'model "qwen3.6:27b" not found: this API key serves only "gemma4:26b".',
    });
    expect(await raised(client(null).list())).toEqual({
      status: 400,
      message: 'No API key: send the header "Authorization: Bearer ob_sk_…" (SDKs: set apiKey).',
    });
    expect(await raised(client(stopped).generate({ model: MODEL, prompt: 'x' }))).toEqual({
      status: 401,
      message: 'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
    });
    const managing = {
      status: 403,
      message:
        "This route manages the model server (pulling, pushing, creating, copying or deleting models and blobs): that is the operator's, never an API key's. Ask the operator for the model you need.",
    };
    expect(await raised(client().pull({ model: MODEL }))).toEqual(managing);
    expect(await raised(client().delete({ model: MODEL }))).toEqual(managing);
    expect(await raised(client().copy({ source: MODEL, destination: 'x' }))).toEqual(managing);
    expect(sim.requests).toEqual([]);
  });

  it('usage counts each native request under its route, with the model server’s counts', async () => {
    const u = (await d.manage('GET', '/v1/usage?instance=gpu')).json as {
      packs: { total: { byRoute: Record<string, { requests: number }> } }[];
    };
    expect(u.packs[0]!.total.byRoute).toEqual({
      ollama_chat: { requests: 2, promptTokens: 3, completionTokens: 6 },
      ollama_generate: { requests: 2, promptTokens: 3, completionTokens: 5 },
      ollama_embed: { requests: 1, promptTokens: 3, completionTokens: 0 },
    });
  });
});
