/**
 * The data plane through `inject()` (docs/contract.md §3): the check order, validation, model mismatch,
 * revocation and pack end, and plain and streamed completions through to a real simulator, whose
 * received requests are asserted. No port is bound by the daemon; the end-to-end suites
 * (test/e2e/sdk.test.ts, refused-body-connection.test.ts) cover the same paths once on sockets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, T0, buildInproc, chatRequests, startSim } from '../helpers/inproc.js';
import { refusal } from '../helpers/status-and-json.js';

const OTHER = 'qwen3.6:27b';
let d: Inproc;
let sim: Simulator;
let simUrl: string;
const keys: Record<string, string> = {};

const hello = (model: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model,
  messages: [{ role: 'user', content: 'Hello' }],
  ...extra,
});
const big = JSON.stringify(hello(MODEL, { messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }));

const MISSING = refusal(
  400,
  'invalid_request_error',
  'missing_api_key',
  'No API key: send the header "Authorization: Bearer ob_sk_…" (SDKs: set apiKey).',
);
const INVALID = refusal(
  401,
  'authentication_error',
  'invalid_api_key',
  'The API key is not valid. Check that it was copied whole; if it was, ask whoever gave you the key for a new one.',
);
const REVOKED = refusal(
  401,
  'authentication_error',
  'revoked_api_key',
  'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
);
const GONE = refusal(
  404,
  'not_found_error',
  'deployment_not_found',
  'No deployment exists for this API key any more. Ask whoever gave you the key for a key of a running instance.',
);
const PENDING = refusal(
  409,
  'conflict_error',
  'deployment_not_ready',
  'The deployment "pending" for this API key is pending. Retry when it is ready.',
);
const TOO_LARGE = refusal(
  413,
  'invalid_request_error',
  'payload_too_large',
  'The request body is larger than the proxy accepts (4096 bytes). Shorten the conversation or ask the operator to raise --body-limit.',
);

async function call(
  key: string | null,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown }> {
  const r = await d.chat(key, body, headers);
  return { status: r.status, json: r.json };
}

async function readyInstance(id: string, extra: Record<string, unknown> = {}): Promise<string> {
  expect((await d.manage('POST', '/v1/instances', { id, model: MODEL, endpoint: simUrl, ...extra })).status).toBe(201);
  const ready = await d.manage('POST', `/v1/instances/${id}/ready`, {});
  return (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
}

beforeAll(async () => {
  d = await buildInproc({ bodyLimit: 4096 });
  ({ sim, url: simUrl } = await startSim());
  for (const id of ['live', 'pending', 'revoked', 'removed']) keys[id] = await readyInstance(id);
  await d.manage('POST', '/v1/instances/pending/pending', {});
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  await d.manage('DELETE', '/v1/instances/removed');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('docs/contract.md §3 check order: the first failing check answers', () => {
  it('1. a missing or non-Bearer key wins over everything after it', async () => {
    expect(await call(null, '{not json')).toEqual(MISSING);
    expect(await call(null, big)).toEqual(MISSING);
    expect(await call('', hello(MODEL), { authorization: 'Basic abc' })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'missing_api_key',
        'The Authorization header must be "Bearer ob_sk_…" (SDKs: set apiKey).',
      ),
    );
  });

  it('2. an unknown key wins over the body', async () => {
    expect(await call('ob_sk_nope', big)).toEqual(INVALID);
  });

  it('3. a removed deployment answers 404 whatever its key and body', async () => {
    expect(await call(keys.removed!, big)).toEqual(GONE);
  });

  it('4. a revoked key wins over instance state and body', async () => {
    expect(await call(keys.revoked!, big)).toEqual(REVOKED);
    expect(await call(keys.revoked!, '{not json')).toEqual(REVOKED);
  });

  it('5. a pending instance answers 409 before the body is looked at', async () => {
    expect(await call(keys.pending!, big)).toEqual(PENDING);
    expect(await call(keys.pending!, { model: OTHER })).toEqual(PENDING);
  });

  it('6. body limit, then JSON, then Content-Type and fields, with param', async () => {
    expect(await call(keys.live!, big)).toEqual(TOO_LARGE);
    expect(await call(keys.live!, '{not json', { 'content-type': 'text/plain' })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_json',
        "The request body is not valid JSON (Expected property name or '}' in JSON at position 1 (line 1 column 2)).",
      ),
    );
    expect(await call(keys.live!, '[1,2]')).toEqual(
      refusal(400, 'invalid_request_error', 'invalid_json', 'The request body must be a JSON object.'),
    );
    expect(await call(keys.live!, '')).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_json',
        'The request body is empty. Send a JSON chat completion request.',
      ),
    );
    expect(await call(keys.live!, JSON.stringify(hello(MODEL)), { 'content-type': 'text/plain' })).toEqual(
      refusal(400, 'invalid_request_error', 'invalid_request', 'Content-Type must be application/json.'),
    );
    expect(await call(keys.live!, { model: OTHER, messages: 'hi' })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_request',
        'messages must be an array of {role, content} turns.',
        'messages',
      ),
    );
    expect(await call(keys.live!, hello(OTHER, { temperature: 7 }))).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_request',
        'temperature must be from 0 to 2; got 7.',
        'temperature',
      ),
    );
    expect(await call(keys.live!, { model: MODEL, messages: [{ role: 7, content: 'x' }] })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_request',
        'messages[0].role must be a string.',
        'messages[0].role',
      ),
    );
  });

  it('7. model mismatch comes last', async () => {
    expect(await call(keys.live!, hello(OTHER))).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'model_mismatch',
        `This API key is bound to a deployment of "${MODEL}"; the request asked for "${OTHER}". Set model to "${MODEL}".`,
        'model',
      ),
    );
  });

  it('none of the refused requests reached the model server', () => {
    expect(chatRequests(sim)).toEqual([]);
  });
});

describe('completions through to the model server', () => {
  it("a plain completion: our id, the shape of docs/contract.md §3.3, and the client's body sent upstream without its Authorization", async () => {
    const r = await d.chat(
      keys.live!,
      hello(MODEL, {
        messages: [
          { role: 'developer', content: 'Be brief' },
          { role: 'user', content: 'plain-1' },
        ],
        max_completion_tokens: 50,
      }),
    );
    expect([r.status, r.headers['content-type']]).toEqual([200, 'application/json']);
    expect(r.json).toEqual({
      id: expect.stringMatching(/^chatcmpl-[A-Za-z0-9]{24}$/),
      object: 'chat.completion',
      created: expect.any(Number),
      model: MODEL,
      system_fingerprint: 'fp_ollama',
      choices: [
        { index: 0, message: { role: 'assistant', content: 't0 t1 t2 t3 t4 t5 t6 t7 ' }, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 8, total_tokens: expect.any(Number) },
    });
    const got = chatRequests(sim).at(-1)!;
    // developer → system, max_completion_tokens → max_tokens (for Ollama); nothing else changed.
    expect(got.body).toEqual({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief' },
        { role: 'user', content: 'plain-1' },
      ],
      max_tokens: 50,
    });
    expect(got.headers.authorization).toBeUndefined();
    expect(got.headers['x-request-id']).toBe(r.headers['x-request-id']);
    expect(JSON.stringify(got)).not.toContain(keys.live!);
  });

  it('a stream: every event relayed with one id of ours, [DONE] last, no usage chunk unasked, include_usage asked upstream', async () => {
    const r = await d.chat(
      keys.live!,
      hello(MODEL, { stream: true, messages: [{ role: 'user', content: 'stream-1' }] }),
    );
    expect([r.status, r.headers['content-type'], r.headers['x-accel-buffering']]).toEqual([
      200,
      'text/event-stream; charset=utf-8',
      'no',
    ]);
    const frames = r.text.split('\n\n');
    expect(frames.pop()).toBe('');
    expect(frames.pop()).toBe('data: [DONE]');
    const events = frames.map((f) => JSON.parse(f.replace(/^data: /, '')) as { id: string });
    const id = events[0]!.id;
    expect(id).toMatch(/^chatcmpl-[A-Za-z0-9]{24}$/);
    const chunk = (delta: Record<string, unknown>, finish: string | null): unknown => ({
      id,
      object: 'chat.completion.chunk',
      created: expect.any(Number),
      model: MODEL,
      system_fingerprint: 'fp_ollama',
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    expect(events).toEqual([
      chunk({ role: 'assistant', content: 't0 ' }, null),
      ...[1, 2, 3, 4, 5, 6, 7].map((i) => chunk({ content: `t${i} ` }, null)),
      chunk({}, 'stop'),
    ]);
    const got = chatRequests(sim).at(-1)!;
    expect(got.body).toEqual({
      stream_options: { include_usage: true },
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: 'stream-1' }],
    });
    expect([got.headers.accept, got.headers.authorization, got.completed, got.chunksSent]).toEqual([
      'text/event-stream',
      undefined,
      true,
      8,
    ]);
  });

  it("counts the key's use in memory, where `keys list` reads it", async () => {
    const listed = (await d.manage('GET', '/v1/keys?instance=live')).json as { usage: { requests: number } }[];
    expect(listed.map((k) => k.usage.requests)).toEqual([2]);
  });
});

describe('revocation and pack end', () => {
  it("a key revoked by hand is refused at once; the instance's other keys still serve", async () => {
    const created = (await d.manage('POST', '/v1/keys', { instance: 'live', name: 'to-revoke' })).json as {
      id: string;
      secret: string;
    };
    expect((await call(created.secret, hello(MODEL))).status).toBe(200);
    expect((await d.manage('POST', `/v1/keys/${created.id}/revoke`, {})).status).toBe(200);
    expect(await call(created.secret, hello(MODEL))).toEqual(REVOKED);
    expect((await call(keys.live!, hello(MODEL))).status).toBe(200);
  });

  it('a pack past its end is refused on the request path, between timer ticks, and the daemon then ends it', async () => {
    const secret = await readyInstance('pack', { packEndsAt: new Date(T0 + 3_600_000).toISOString() });
    expect((await call(secret, hello(MODEL))).status).toBe(200);
    const sent = chatRequests(sim).length;
    d.clock.advance(2 * 3_600_000);
    try {
      expect(await call(secret, hello(MODEL))).toEqual(REVOKED);
      expect(chatRequests(sim).length).toBe(sent);
      // No pack timer is armed before listen(): the refusal itself asked for the pack to be ended.
      let state = '';
      for (let i = 0; i < 200 && state !== 'stopped'; i++) {
        state = ((await d.manage('GET', '/v1/instances/pack')).json as { state: string }).state;
        if (state !== 'stopped') await new Promise((r) => setImmediate(r));
      }
      expect(state).toBe('stopped');
      const revocations = (await d.manage('GET', '/v1/revocations?instance=pack')).json as { reason: string }[];
      expect(revocations.map((r) => r.reason)).toEqual(['pack_ended']);
    } finally {
      d.clock.ms = T0;
    }
  });
});

describe('the other routes', () => {
  it('GET /v1/models applies checks 1 to 4 only, whatever the instance state', async () => {
    const models = async (key: string): Promise<unknown> => {
      const r = await d.daemon.dataPlane.inject({
        method: 'GET',
        url: '/v1/models',
        headers: { authorization: `Bearer ${key}` },
      });
      return { status: r.statusCode, json: r.json() as unknown };
    };
    expect(await models(keys.pending!)).toEqual({
      status: 200,
      json: {
        object: 'list',
        data: [{ id: MODEL, object: 'model', created: expect.any(Number), owned_by: 'ob-proxy' }],
      },
    });
    expect(await models(keys.revoked!)).toEqual(REVOKED);
    expect(await models(keys.removed!)).toEqual(GONE);
  });

  it('/healthz answers, and an unknown route says the base URL lacks /v1', async () => {
    const health = await d.daemon.dataPlane.inject({ method: 'GET', url: '/healthz' });
    expect([health.statusCode, health.json()]).toEqual([200, { status: 'ok' }]);
    const lost = await d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/chat/completions',
      headers: { authorization: `Bearer ${keys.live!}` },
    });
    expect([lost.statusCode, lost.json()]).toEqual([
      404,
      {
        error: {
          message:
            'No route POST /chat/completions. The proxy serves POST /v1/chat/completions, POST /v1/responses, POST /v1/completions, POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models and GET /v1/models/{model}. Your base URL is missing /v1: use {base_url}/v1.',
          type: 'not_found_error',
          code: 'route_not_found',
          param: null,
        },
      },
    ]);
  });
});

it('OB_PROXY_MODELS replaces the model ids the daemon accepts', async () => {
  const other = await buildInproc({}, { OB_PROXY_MODELS: 'llama3.3:70b, gemma4:26b' });
  try {
    expect((await other.manage('POST', '/v1/instances', { id: 'l1', model: 'llama3.3:70b' })).json).toMatchObject({
      id: 'l1',
      model: 'llama3.3:70b',
      state: 'pending',
    });
    const refused = await other.manage('POST', '/v1/instances', { id: 'q1', model: OTHER });
    expect(refused.status).toBe(400);
    expect((refused.json as { error: { message: string } }).error.message).toContain(
      'the allowed models are llama3.3:70b, gemma4:26b.',
    );
  } finally {
    await other.close();
  }
});
