/**
 * The key's promise, one table over every proxied API (docs/contract.md §3 and §6): chat
 * completions, the Responses API, legacy completions and Anthropic's Messages. On each route: no
 * key, an unknown key, a revoked key, a removed deployment, a key of another instance's model,
 * duplicate and case-variant JSON keys are refused in that API's error shape and nothing reaches
 * the model server; a revocation mid-stream ends the stream with one error event in that API's
 * shape and aborts the upstream; a hostile endless answer is bounded.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Answer, type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

interface Route {
  name: string;
  path: string;
  /** A request body with `text` where the user's words go. */
  body(model: string, text: string, stream: boolean): Record<string, unknown>;
  /** The body as JSON text with the model named twice, or as `MODEL`: what json-body.ts refuses. */
  headers(key: string): Record<string, string>;
  /** The error body this API's clients parse. */
  error(type: string, code: string, message: string, param?: string | null): unknown;
  /** The code in a stream's error event, and whether the frame carries `event: error`. */
  eventCode(data: Record<string, unknown>): unknown;
  namedEvent: boolean;
  missingKey: string;
}

const openaiError = (type: string, code: string, message: string, param: string | null = null): unknown => ({
  error: { message, type, code, param },
});
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });
const MISSING = 'No API key: send the header "Authorization: Bearer ob_sk_…" (SDKs: set apiKey).';

const ROUTES: Route[] = [
  {
    name: 'chat',
    path: '/v1/chat/completions',
    body: (model, text, stream) => ({ model, messages: [{ role: 'user', content: text }], stream }),
    headers: bearer,
    error: openaiError,
    eventCode: (d) => (d.error as { code: unknown }).code,
    namedEvent: false,
    missingKey: MISSING,
  },
  {
    name: 'responses',
    path: '/v1/responses',
    body: (model, text, stream) => ({ model, input: text, stream }),
    headers: bearer,
    error: openaiError,
    eventCode: (d) => d.code,
    namedEvent: true,
    missingKey: MISSING,
  },
  {
    name: 'completions',
    path: '/v1/completions',
    body: (model, text, stream) => ({ model, prompt: text, suffix: '\n', stream }),
    headers: bearer,
    error: openaiError,
    eventCode: (d) => (d.error as { code: unknown }).code,
    namedEvent: false,
    missingKey: MISSING,
  },
  {
    name: 'messages',
    path: '/v1/messages',
    body: (model, text, stream) => ({ model, max_tokens: 512, messages: [{ role: 'user', content: text }], stream }),
    headers: (key) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }),
    // Anthropic's type for the status (a conflict is a bad request to its clients), our code beside it.
    error: (type, code, message) => ({
      type: 'error',
      error: { type: type === 'conflict_error' ? 'invalid_request_error' : type, message, code },
    }),
    eventCode: (d) => (d.error as { code: unknown }).code,
    namedEvent: true,
    missingKey:
      'No API key: send the header "x-api-key: ob_sk_…" or "Authorization: Bearer ob_sk_…" (Anthropic SDK: set apiKey or authToken).',
  },
];

let d: Inproc;
let sim: Simulator;
let simUrl: string;
const keys: Record<string, string> = {};

async function post(route: Route, key: string | null, payload: unknown): Promise<Answer> {
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: route.path,
    headers: { 'content-type': 'application/json', ...(key === null ? {} : route.headers(key)) },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
  let json: unknown = null;
  try {
    json = JSON.parse(res.body);
  } catch {
    // a stream
  }
  return { status: res.statusCode, headers: res.headers, json, text: res.body };
}

async function readyInstance(id: string, model = MODEL): Promise<string> {
  expect((await d.manage('POST', '/v1/instances', { id, model, endpoint: simUrl })).status).toBe(201);
  const ready = await d.manage('POST', `/v1/instances/${id}/ready`, { probe: false });
  return (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
}

beforeAll(async () => {
  d = await buildInproc({ maxFrameBytes: 16 * 1024 });
  ({ sim, url: simUrl } = await startSim({ models: [MODEL, 'qwen3.6:27b'], chunks: 3 }));
  for (const id of ['live', 'revoked', 'removed', ...ROUTES.map((r) => `mid-${r.name}`)])
    keys[id] = await readyInstance(id);
  keys.other = await readyInstance('other', 'qwen3.6:27b');
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  await d.manage('DELETE', '/v1/instances/removed');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

beforeEach(async () => {
  await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
});

describe.each(ROUTES)('$name ($path)', (route) => {
  it('no key, an unknown key, a revoked key, a removed deployment, another model, duplicate and case-variant keys: refused in the API’s shape, nothing sent', async () => {
    const body = JSON.stringify(route.body(MODEL, 'Say hello', false));
    const cases: [string, string | null, string, number, unknown][] = [
      ['no key', null, body, 400, route.error('invalid_request_error', 'missing_api_key', route.missingKey)],
      [
        'unknown key',
        'ob_sk_nope',
        body,
        401,
        route.error(
          'authentication_error',
          'invalid_api_key',
          'The API key is not valid. Check that it was copied whole; if it was, ask whoever gave you the key for a new one.',
        ),
      ],
      [
        'revoked key',
        keys.revoked!,
        body,
        401,
        route.error(
          'authentication_error',
          'revoked_api_key',
          'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
        ),
      ],
      [
        'removed deployment',
        keys.removed!,
        body,
        404,
        route.error(
          'not_found_error',
          'deployment_not_found',
          'No deployment exists for this API key any more. Ask whoever gave you the key for a key of a running instance.',
        ),
      ],
      [
        'another instance’s model',
        keys.other!,
        body,
        400,
        route.error(
          'invalid_request_error',
          'model_mismatch',
          'This API key is bound to a deployment of "qwen3.6:27b"; the request asked for "gemma4:26b". Set model to "qwen3.6:27b".',
          'model',
        ),
      ],
      [
        'a duplicate key',
        keys.live!,
        body.replace('{', '{"model":"qwen3.6:27b",'),
        400,
        route.error(
          'invalid_request_error',
          'invalid_json',
          'The request body repeats a key inside one object. Send each key once: decoders disagree on which copy counts.',
        ),
      ],
      [
        'a case-variant key',
        keys.live!,
        body.replace('{', '{"MODEL":"qwen3.6:27b",'),
        400,
        route.error(
          'invalid_request_error',
          'invalid_json',
          '"MODEL" differs from the field "model" only by case. Send the field as "model".',
          'MODEL',
        ),
      ],
    ];
    for (const [what, key, payload, status, json] of cases) {
      const r = await post(route, key, payload);
      expect({ what, status: r.status, json: r.json }).toEqual({ what, status, json });
    }
    expect(sim.requests.filter((q) => q.method === 'POST')).toEqual([]);
  });

  it('a revocation mid-stream ends it with one error event in the API’s shape, and aborts the upstream', async () => {
    const id = `mid-${route.name}`;
    const pending = post(route, keys[id]!, route.body(MODEL, 'Say hello [[sim tokensPerSecond=20 chunks=200]]', true));
    await sim.waitFor((q) => q.path === route.path && q.chunksSent >= 4);
    const listed = (await d.manage('GET', `/v1/keys?instance=${id}`)).json as { id: string }[];
    expect((await d.manage('POST', `/v1/keys/${listed[0]!.id}/revoke`, {})).status).toBe(200);
    const r = await pending;
    expect(r.status).toBe(200);
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    expect(frames.length).toBeGreaterThanOrEqual(4);
    const last = frames[frames.length - 1]!;
    const lines = last.split('\n');
    expect(lines[0]).toBe(route.namedEvent ? 'event: error' : lines[0]);
    const data = JSON.parse(lines[lines.length - 1]!.slice(6)) as Record<string, unknown>;
    expect(route.eventCode(data)).toBe('revoked_api_key');
    expect(r.text.match(/revoked_api_key/g)).toHaveLength(1);
    expect(r.text).not.toContain('[DONE]');
    const upstream = await sim.waitFor((q) => q.path === route.path && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it('a hostile endless answer is bounded: an event that never ends ends the stream with one error event', async () => {
    const r = await post(route, keys.live!, route.body(MODEL, 'x [[sim fail=endless-line]]', true));
    expect(r.status).toBe(200);
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    expect(frames).toHaveLength(1);
    const lines = frames[0]!.split('\n');
    const data = JSON.parse(lines[lines.length - 1]!.slice(6)) as Record<string, unknown>;
    expect(route.eventCode(data)).toBe('upstream_error');
    expect(JSON.stringify(data)).toContain(
      'The model server sent an event larger than 16384 bytes; the stream was ended.',
    );
    await sim.waitFor((q) => q.path === route.path && q.endedAt !== null && q.aborted);
  });
});

describe('POST /v1/messages: the key in x-api-key or Authorization', () => {
  const messages = ROUTES[3]!;
  const body = JSON.stringify(messages.body(MODEL, 'Say hello', false));
  const inject = (headers: Record<string, string>) =>
    d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'content-type': 'application/json', ...headers },
      payload: body,
    });

  it('both headers naming the same key pass; naming different keys is refused, saying so, and nothing is sent', async () => {
    const same = await inject({ 'x-api-key': keys.live!, authorization: `Bearer ${keys.live!}` });
    expect(same.statusCode).toBe(200);
    const differ = await inject({ 'x-api-key': keys.live!, authorization: `Bearer ${keys.other!}` });
    expect({ status: differ.statusCode, json: JSON.parse(differ.body) as unknown }).toEqual({
      status: 400,
      json: {
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message:
            'The request names two different API keys, in x-api-key and in Authorization. Send the key in one of them (Anthropic SDK: apiKey or authToken, not both).',
          code: 'conflicting_api_keys',
        },
      },
    });
    expect(sim.requests.filter((q) => q.path === '/v1/messages')).toHaveLength(1);
  });

  it('an error of the model server reaches the client in Anthropic’s shape, its type kept', async () => {
    const r = await d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'content-type': 'application/json', 'x-api-key': keys.live! },
      payload: messages.body(MODEL, 'x [[sim fail=http-error errorStatus=503]]', false),
    });
    expect({ status: r.statusCode, json: JSON.parse(r.body) as unknown }).toEqual({
      status: 503,
      json: {
        type: 'error',
        error: {
          type: 'overloaded_error',
          message: 'Model server error (HTTP 503): server busy, please try again.  maximum pending requests exceeded',
          code: 'overloaded_error',
        },
      },
    });
  });
});
