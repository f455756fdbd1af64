/**
 * The Responses API's WebSocket mode on GET /v1/responses, over real sockets to a daemon in
 * process, with a simulator behind it that has no WebSocket (it serves POST /v1/responses): each
 * `response.create` reaches it as one streamed POST, and `previous_response_id` continues the
 * socket's own last response, whose input and output the gateway sends again. What one socket
 * keeps, no other socket and no other key can reach.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance, responsesSent } from '../helpers/inproc-responses.js';
import { type Event, SocketClient, responseIn } from '../helpers/socket-client.js';

let d: Inproc;
let sim: Simulator;
let key: string;
let base: string;

const keyId = (secret: string): string => secret.slice(6, 18);
const user = (content: string): Record<string, unknown> => ({ type: 'message', role: 'user', content });
const TEXT_EVENTS = (deltas: number): string[] => [
  'response.created',
  'response.in_progress',
  'response.output_item.added',
  'response.content_part.added',
  ...Array<string>(deltas).fill('response.output_text.delta'),
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.completed',
];

beforeAll(async () => {
  d = await buildInproc();
  await d.daemon.listen();
  let url: string;
  ({ sim, url } = await startSim());
  key = await readyInstance(d, 'gpu-1', url);
  base = d.daemon.ctx.baseUrl;
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('turns', () => {
  it('two turns: the second continues the first from what the socket kept, sent upstream in full', async () => {
    const c = await SocketClient.open(base, key);
    expect(c.headers['x-request-id']).toMatch(/^req_\w{24}$/);
    expect(c.headers['x-codex-websocket-max-message-bytes']).toBe(String(16 * 1024 * 1024));
    const sentBefore = responsesSent(sim).length;
    const usageBefore = d.daemon.ctx.lifecycle.registry.keys.get(keyId(key))!.usage.requests;

    const first = await c.create({ model: MODEL, store: false, input: 'Remember 7 [[sim chunks=3]]' });
    expect(first.map((e) => e.type)).toEqual(TEXT_EVENTS(3));
    const r1 = responseIn(first);
    expect(r1).toMatchObject({ id: expect.stringMatching(/^resp_\w{24}$/), status: 'completed' });
    // Every lifecycle event names our id, not the model server's.
    expect(first.filter((e) => 'response' in e).map((e) => (e.response as { id: string }).id)).toEqual([
      r1.id,
      r1.id,
      r1.id,
    ]);

    const next = user('Which number? [[sim chunks=2]]');
    const second = await c.create({ model: MODEL, store: false, previous_response_id: r1.id, input: [next] });
    expect(second.map((e) => e.type)).toEqual(TEXT_EVENTS(2));
    const r2 = responseIn(second);
    expect(r2.id).not.toBe(r1.id);
    expect(r2.previous_response_id).toBe(r1.id);
    expect(second[0]!.response).toMatchObject({ id: r2.id, previous_response_id: r1.id });

    expect(responsesSent(sim).slice(sentBefore)).toEqual([
      { model: MODEL, store: false, input: 'Remember 7 [[sim chunks=3]]', stream: true },
      {
        model: MODEL,
        store: false,
        input: [user('Remember 7 [[sim chunks=3]]'), ...(r1.output as unknown[]), next],
        stream: true,
      },
    ]);
    // Each response is one request of the key's, on the Responses route, with its access line.
    const usage = d.daemon.ctx.lifecycle.registry.keys.get(keyId(key))!.usage;
    expect(usage.requests).toBe(usageBefore + 2);
    const lines = d.logs.filter((l) => l.msg === 'response' && l.key === keyId(key));
    expect(lines.slice(-2)).toEqual([
      expect.objectContaining({ stream: true, status: 200, instance: 'gpu-1' }),
      expect.objectContaining({ stream: true, status: 200, instance: 'gpu-1' }),
    ]);
    c.close();
    expect(await c.closed).toEqual({ code: 1005, reason: '' });
  });

  it('a third turn continues the second, and a string input is a user message', async () => {
    const c = await SocketClient.open(base, key);
    const r1 = responseIn(await c.create({ model: MODEL, input: 'one [[sim chunks=1]]' }));
    const r2 = responseIn(await c.create({ model: MODEL, previous_response_id: r1.id, input: 'two [[sim chunks=1]]' }));
    const sentBefore = responsesSent(sim).length;
    await c.create({ model: MODEL, previous_response_id: r2.id, input: 'three [[sim chunks=1]]' });
    expect(responsesSent(sim).slice(sentBefore)).toEqual([
      {
        model: MODEL,
        input: [
          user('one [[sim chunks=1]]'),
          ...(r1.output as unknown[]),
          user('two [[sim chunks=1]]'),
          ...(r2.output as unknown[]),
          user('three [[sim chunks=1]]'),
        ],
        stream: true,
      },
    ]);
    // Only the last response is kept: the first can no longer be continued.
    const stale = await c.create({ model: MODEL, previous_response_id: r1.id, input: 'again' });
    expect(stale.map((e) => [e.type, (e.error as { code?: string } | undefined)?.code])).toEqual([
      ['error', 'previous_response_not_found'],
    ]);
    c.close();
  });

  it('a warm-up (generate: false) is answered by the gateway, and its input continued from', async () => {
    const c = await SocketClient.open(base, key);
    const sentBefore = responsesSent(sim).length;
    const dev = { type: 'message', role: 'developer', content: 'You are terse.' };
    const warm = await c.create({ model: MODEL, store: false, generate: false, input: [dev], tools: [] });
    expect(warm.map((e) => e.type)).toEqual(['response.created', 'response.completed']);
    const w = responseIn(warm);
    expect(w).toMatchObject({
      id: expect.stringMatching(/^resp_\w{24}$/),
      status: 'completed',
      output: [],
      model: MODEL,
    });
    expect(w.usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });
    expect(responsesSent(sim).length).toBe(sentBefore);

    await c.create({ model: MODEL, store: false, previous_response_id: w.id, input: [user('hi [[sim chunks=1]]')] });
    expect(responsesSent(sim).slice(sentBefore)).toEqual([
      { model: MODEL, store: false, input: [dev, user('hi [[sim chunks=1]]')], stream: true },
    ]);
    c.close();
  });
});

describe('a model server without /v1/responses', () => {
  it('serves the socket through the translation to chat completions, continuations included', async () => {
    const chatOnly = await startSim({ responses: false });
    try {
      const k = await readyInstance(d, 'chat-only', chatOnly.url);
      const c = await SocketClient.open(base, k);
      const first = await c.create({ model: MODEL, input: 'Remember 7 [[sim chunks=2]]' });
      expect(first.map((e) => e.type)).toEqual(TEXT_EVENTS(2));
      const r1 = responseIn(first);
      const second = await c.create({ model: MODEL, previous_response_id: r1.id, input: 'Which? [[sim chunks=1]]' });
      expect(responseIn(second).previous_response_id).toBe(r1.id);
      const chats = chatOnly.sim.requests.filter((r) => r.path === '/v1/chat/completions');
      expect((chats.at(-1)!.body as { messages: unknown }).messages).toEqual([
        { role: 'user', content: 'Remember 7 [[sim chunks=2]]' },
        { role: 'assistant', content: 't0 t1 ' },
        { role: 'user', content: 'Which? [[sim chunks=1]]' },
      ]);
      c.close();
    } finally {
      await chatOnly.sim.close();
    }
  });
});

describe('what a socket keeps is its own', () => {
  it("another key's response, and another socket's of the same key, are not found; nothing is sent", async () => {
    const other = (
      (await d.manage('POST', '/v1/keys', { instance: 'gpu-1', name: 'other' })).json as { secret: string }
    ).secret;
    const a = await SocketClient.open(base, key);
    const ra = responseIn(await a.create({ model: MODEL, store: false, input: 'secret plan [[sim chunks=1]]' }));
    const sentBefore = responsesSent(sim).length;
    const notFound = (id: unknown): Event => ({
      type: 'error',
      status: 400,
      error: {
        message: `Previous response with id "${String(id)}" not found. A socket keeps only its own last response, while it is open; send the whole conversation in \`input\` without previous_response_id.`,
        type: 'invalid_request_error',
        code: 'previous_response_not_found',
        param: 'previous_response_id',
      },
    });

    const b = await SocketClient.open(base, other);
    expect(await b.create({ model: MODEL, previous_response_id: ra.id, input: 'what was it?' })).toEqual([
      notFound(ra.id),
    ]);
    const sameKey = await SocketClient.open(base, key);
    expect(await sameKey.create({ model: MODEL, previous_response_id: ra.id, input: 'and?' })).toEqual([
      notFound(ra.id),
    ]);
    expect(responsesSent(sim).length).toBe(sentBefore);
    // The refusal leaves the socket open, and the owner's chain whole.
    expect(responseIn(await b.create({ model: MODEL, input: 'fresh [[sim chunks=1]]' })).status).toBe('completed');
    const own = await a.create({ model: MODEL, previous_response_id: ra.id, input: 'go on [[sim chunks=1]]' });
    expect(responseIn(own).previous_response_id).toBe(ra.id);
    for (const s of [a, b, sameKey]) s.close();
  });

  it('a continuation that fails lets go of what it continued', async () => {
    const c = await SocketClient.open(base, key);
    const r1 = responseIn(await c.create({ model: MODEL, input: 'start [[sim chunks=1]]' }));
    const failed = await c.create({ model: MODEL, previous_response_id: r1.id, input: '[[sim fail=http-error]]' });
    expect(failed).toEqual([
      { type: 'error', status: 500, error: expect.objectContaining({ type: 'api_error', code: 'upstream_error' }) },
    ]);
    const retry = await c.create({ model: MODEL, previous_response_id: r1.id, input: 'again' });
    expect((retry[0]!.error as { code: string }).code).toBe('previous_response_not_found');
    c.close();
  });
});

describe('each message is checked as a request is', () => {
  it('a model other than the key’s is refused in the message, an alias is sent as the model', async () => {
    const c = await SocketClient.open(base, key);
    const sentBefore = responsesSent(sim).length;
    expect(await c.create({ model: 'qwen3.6:27b', input: 'hi' })).toEqual([
      {
        type: 'error',
        status: 400,
        error: {
          message:
            'This API key is bound to a deployment of "gemma4:26b"; the request asked for "qwen3.6:27b". Set model to "gemma4:26b".',
          type: 'invalid_request_error',
          code: 'model_mismatch',
          param: 'model',
        },
      },
    ]);
    expect(responsesSent(sim).length).toBe(sentBefore);
    expect((await d.manage('POST', '/v1/instances/gpu-1/aliases', { add: ['gpt-5-codex'] })).status).toBe(200);
    await c.create({ model: 'gpt-5-codex', input: 'hi [[sim chunks=1]]' });
    expect(responsesSent(sim).slice(sentBefore)).toEqual([
      { model: MODEL, input: 'hi [[sim chunks=1]]', stream: true },
    ]);
    expect((await d.manage('POST', '/v1/instances/gpu-1/aliases', { clear: true })).status).toBe(200);
    c.close();
  });

  it('what is not a response.create is refused, and the socket stays open', async () => {
    const c = await SocketClient.open(base, key);
    const refusal = async (raw: string | Buffer): Promise<unknown> => {
      const from = c.events.length;
      c.ws.send(raw);
      const [e] = await c.next(from, 'error');
      return [(e!.error as { code: string }).code, (e!.error as { param: unknown }).param];
    };
    expect(await refusal('{"type":"response.cancel"}')).toEqual(['invalid_request', 'type']);
    expect(await refusal('{"type":"response.create",')).toEqual(['invalid_json', null]);
    expect(await refusal(Buffer.from('{"type":"response.create"}'))).toEqual(['invalid_request', null]);
    expect(await refusal(JSON.stringify({ type: 'response.create', model: MODEL, background: true }))).toEqual([
      'invalid_request',
      'background',
    ]);
    expect(await refusal(JSON.stringify({ type: 'response.create', model: MODEL, Stream: false }))).toEqual([
      'invalid_json',
      'Stream',
    ]);
    expect(responseIn(await c.create({ model: MODEL, input: 'still here [[sim chunks=1]]' })).status).toBe('completed');
    c.close();
  });
});

it('POST /v1/responses/compact is refused, saying why; nothing is sent', async () => {
  const sentBefore = responsesSent(sim).length;
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: '/v1/responses/compact',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ model: MODEL, input: [user('a long conversation')] }),
  });
  expect(res.statusCode).toBe(404);
  expect(res.headers['x-should-retry']).toBe('false');
  expect(JSON.parse(res.body)).toEqual({
    error: {
      message:
        'POST /v1/responses/compact is not served: no model server here compacts, and its answer is an opaque item that only the server that wrote it can read back. Shorten the conversation on the client (Codex compacts by itself), or send it whole.',
      type: 'not_found_error',
      code: 'route_not_found',
      param: null,
    },
  });
  expect(responsesSent(sim).length).toBe(sentBefore);
});
