/**
 * POST /v1/responses through `inject()` (docs/contract.md §6): the same request path as chat, so the
 * key's checks, their order and the JSON-key rule hold; the body checked as OpenAI documents it;
 * the answer passed through from the simulator's own /v1/responses, event for event, with only
 * the response id replaced, and no [DONE]; a model server without the route learned from its 404,
 * that request sent again translated to chat completions, and later ones sent so at once, with
 * the same promises (usage, revocation mid-stream, bounds on a hostile answer). What the
 * simulator received is asserted for each case (nothing, for refusals).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { ROUTE_MISSING_MS } from '../../daemon/data-plane/route-support.js';
import { type Answer, type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let oldSim: Simulator;
let oldSimUrl: string;
const keys: Record<string, string> = {};

async function post(key: string | null, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: '/v1/responses',
    headers: {
      'content-type': 'application/json',
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...headers,
    },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch {
    json = null;
  }
  return { status: res.statusCode, headers: res.headers, json, text: res.body };
}

const sent = (s: Simulator): unknown[] => s.requests.filter((r) => r.path === '/v1/responses').map((r) => r.body);

async function readyInstance(id: string, endpoint: string, model = MODEL): Promise<string> {
  expect((await d.manage('POST', '/v1/instances', { id, model, endpoint })).status).toBe(201);
  const ready = await d.manage('POST', `/v1/instances/${id}/ready`, { probe: false });
  return (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
}

beforeAll(async () => {
  d = await buildInproc({ bodyLimit: 64 * 1024, maxFrameBytes: 16 * 1024, maxAnswerBytes: 256 * 1024 });
  ({ sim, url: simUrl } = await startSim({ models: [MODEL, 'qwen3.6:27b'], chunks: 3 }));
  ({ sim: oldSim, url: oldSimUrl } = await startSim({ responses: false }));
  for (const id of ['live', 'revoked', 'removed', 'mid']) keys[id] = await readyInstance(id, simUrl);
  keys.other = await readyInstance('other', simUrl, 'qwen3.6:27b');
  for (const id of ['old', 'old-stream', 'old-bad', 'old-mid', 'old-hostile'])
    keys[id] = await readyInstance(id, oldSimUrl);
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  await d.manage('DELETE', '/v1/instances/removed');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
  await oldSim?.close();
});

beforeEach(async () => {
  await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
  await fetch(`${oldSimUrl}/_sim/requests`, { method: 'DELETE' });
});

const err = (status: number, type: string, code: string, message: string, param: string | null = null) => ({
  status,
  json: { error: { message, type, code, param } },
});

describe('the key is checked as on chat, in the same order, and a refusal sends nothing', () => {
  it('no key, an unknown key, a revoked key, a removed deployment, another instance’s model', async () => {
    const body = { model: MODEL, input: 'Say hello' };
    const cases: [string | null, unknown][] = [
      [
        null,
        err(
          400,
          'invalid_request_error',
          'missing_api_key',
          'No API key: send the header "Authorization: Bearer ob_sk_…" (SDKs: set apiKey).',
        ),
      ],
      [
        'ob_sk_nope',
        err(
          401,
          'authentication_error',
          'invalid_api_key',
          'The API key is not valid. Check that it was copied whole, or generate a new key in the console.',
        ),
      ],
      [
        keys.revoked!,
        err(
          401,
          'authentication_error',
          'revoked_api_key',
          'This API key has been revoked and can never be used again. Generate a new key for a ready instance.',
        ),
      ],
      [
        keys.removed!,
        err(
          404,
          'not_found_error',
          'deployment_not_found',
          'No deployment exists for this API key any more. Generate a key for a running instance.',
        ),
      ],
      [
        keys.other!,
        err(
          400,
          'invalid_request_error',
          'model_mismatch',
          'This API key is bound to a deployment of "qwen3.6:27b"; the request asked for "gemma4:26b". Set model to "qwen3.6:27b".',
          'model',
        ),
      ],
    ];
    for (const [key, expected] of cases) {
      const r = await post(key, body);
      expect({ status: r.status, json: r.json }).toEqual(expected);
    }
    expect(sent(sim)).toEqual([]);
  });

  it('a revoked key wins over a bad body; a bad body wins over the model', async () => {
    expect((await post(keys.revoked!, '{not json')).status).toBe(401);
    const r = await post(keys.other!, { model: MODEL, input: 5 });
    expect(r.json).toEqual({
      error: {
        message: 'input must be a string or an array of items.',
        type: 'invalid_request_error',
        code: 'invalid_request',
        param: 'input',
      },
    });
    expect(sent(sim)).toEqual([]);
  });

  it('duplicate and case-variant keys are refused, at the top and inside items', async () => {
    const cases: [string, string | null, string][] = [
      [
        `{"model":"${MODEL}","input":"a","model":"qwen3.6:27b"}`,
        null,
        'The request body repeats a key inside one object. Send each key once: decoders disagree on which copy counts.',
      ],
      [
        `{"model":"${MODEL}","input":"a","MODEL":"qwen3.6:27b"}`,
        'MODEL',
        '"MODEL" differs from the field "model" only by case. Send the field as "model".',
      ],
      [
        `{"model":"${MODEL}","input":[{"role":"user","content":"a","ROLE":"system"}]}`,
        'input[0].ROLE',
        '"input[0].ROLE" differs from the field "role" only by case. Send the field as "role".',
      ],
      [
        `{"model":"${MODEL}","input":"a","Previous_Response_Id":"resp_1"}`,
        'Previous_Response_Id',
        '"Previous_Response_Id" differs from the field "previous_response_id" only by case. Send the field as "previous_response_id".',
      ],
    ];
    for (const [body, param, message] of cases) {
      const r = await post(keys.live!, body);
      expect({ status: r.status, json: r.json }).toEqual(
        err(400, 'invalid_request_error', 'invalid_json', message, param),
      );
    }
    expect(sent(sim)).toEqual([]);
  });

  it('previous_response_id and conversation: 400 unsupported_parameter, telling the client to send the whole conversation', async () => {
    for (const field of ['previous_response_id', 'conversation']) {
      const r = await post(keys.live!, { model: MODEL, input: 'next', [field]: 'resp_abc' });
      expect({ status: r.status, json: r.json }).toEqual(
        err(
          400,
          'invalid_request_error',
          'unsupported_parameter',
          `${field} is not supported: this deployment keeps no responses or conversations. Send the whole conversation in \`input\` (with store: false, SDKs send every item).`,
          field,
        ),
      );
    }
    expect(sent(sim)).toEqual([]);
  });

  it('fields are checked as OpenAI documents them, naming the field', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ input: 'a', temperature: 3 }, 'temperature', 'temperature must be from 0 to 2; got 3.'],
      [
        { input: 'a', max_output_tokens: 0 },
        'max_output_tokens',
        'max_output_tokens must be an integer from 1 to 10000000.',
      ],
      [
        { input: [{ role: 'robot', content: 'a' }] },
        'input[0].role',
        'input[0].role must be one of user, assistant, system, developer.',
      ],
      [{ input: 'a', tools: [{ type: 'function' }] }, 'tools[0].name', 'tools[0].name must be a non-empty string.'],
      [
        { input: 'a', tool_choice: 'sometimes' },
        'tool_choice',
        'tool_choice must be one of none, auto, required, or an object naming a tool.',
      ],
      [{ input: 'a', metadata: { a: 1 } }, 'metadata.a', 'metadata.a must be a string.'],
      [
        { input: [{ type: 'function_call_output', output: 'x' }] },
        'input[0].call_id',
        'input[0].call_id must be a string.',
      ],
    ];
    for (const [extra, param, message] of cases) {
      const r = await post(keys.live!, { model: MODEL, ...extra });
      expect({ status: r.status, json: r.json }).toEqual(
        err(400, 'invalid_request_error', 'invalid_request', message, param),
      );
    }
    expect(sent(sim)).toEqual([]);
  });
});

describe('passthrough to the model server’s /v1/responses', () => {
  it('a plain response: the client’s bytes go upstream untouched, the answer comes back with only its id replaced', async () => {
    const body = `{"model":"${MODEL}","input":"Say hello","store":false,"unlisted_field":{"kept":true}}`;
    const r = await post(keys.live!, body);
    expect(r.status).toBe(200);
    expect(sent(sim)).toEqual([JSON.parse(body)]);
    const res = r.json as Record<string, unknown>;
    expect(res.id).toMatch(/^resp_[0-9A-Za-z]{24}$/);
    expect(r.text.endsWith('}\n')).toBe(true);
    expect(res.output).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 't0 t1 t2 ', annotations: [], logprobs: [] }],
      },
    ]);
    expect(res.usage).toEqual({
      input_tokens: 2,
      output_tokens: 3,
      total_tokens: 5,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    });
    // The key's usage counts the exchange with the Responses usage's tokens.
    const usage = ((await d.manage('GET', '/v1/keys?instance=live')).json as { usage: Record<string, unknown> }[])[0]!
      .usage;
    expect(usage).toMatchObject({ requests: 1, promptTokens: 2, completionTokens: 3, errors: 0 });
  });

  it('a stream: every event as the model server sent it, the response id ours in each response object, no [DONE]', async () => {
    const r = await post(keys.live!, { model: MODEL, input: 'Say hello', stream: true });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    const events = frames.map((f) => {
      const [ev, data] = f.split('\n');
      return { event: ev!.slice(7), data: JSON.parse(data!.slice(6)) as Record<string, unknown> };
    });
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.data.sequence_number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const ids = events.filter((e) => e.data.response !== undefined).map((e) => (e.data.response as { id: string }).id);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^resp_[0-9A-Za-z]{24}$/);
    // Keys sorted as Ollama's Go maps write them: relayed as they came.
    expect(frames[4]).toMatch(
      /^event: response.output_text.delta\ndata: \{"content_index":0,"delta":"t0 ","item_id":"msg_\d+","logprobs":\[\],"output_index":0,"sequence_number":4,"type":"response.output_text.delta"\}$/,
    );
    expect(r.text).not.toContain('[DONE]');
    expect(sent(sim)).toEqual([{ model: MODEL, input: 'Say hello', stream: true }]);
  });
});

/** What the simulator received, as `METHOD path` lines (its health probes left out). */
const paths = (s: Simulator): string[] =>
  s.requests.filter((r) => r.path.startsWith('/v1/')).map((r) => `${r.method} ${r.path}`);

/** The frames of a Responses stream: each event's name and its data, parsed. */
function framesOf(text: string): { event: string; data: Record<string, unknown> }[] {
  return text
    .split('\n\n')
    .filter((f) => f !== '')
    .map((f) => {
      const [ev, data] = f.split('\n');
      return { event: ev!.slice(7), data: JSON.parse(data!.slice(6)) as Record<string, unknown> };
    });
}

/** What a translated response repeats of a request that set none of its fields: OpenAI's defaults. */
const TRANSLATED_DEFAULTS = {
  object: 'response',
  created_at: Math.floor(T0 / 1000),
  model: MODEL,
  previous_response_id: null,
  instructions: null,
  error: null,
  tools: [],
  tool_choice: 'auto',
  truncation: 'disabled',
  parallel_tool_calls: true,
  text: { format: { type: 'text' } },
  top_p: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  top_logprobs: 0,
  temperature: 1,
  reasoning: null,
  max_output_tokens: null,
  max_tool_calls: null,
  store: false,
  background: false,
  service_tier: 'default',
  metadata: {},
  safety_identifier: null,
  prompt_cache_key: null,
};

describe('a model server without /v1/responses: translated to its chat completions', () => {
  it('the first request finds the 404, is sent again translated, and answered whole; later ones go straight to chat', async () => {
    const first = await post(keys.old!, { model: MODEL, input: 'Say hello' });
    expect(paths(oldSim)).toEqual(['POST /v1/responses', 'POST /v1/chat/completions']);
    const second = await post(keys.old!, { model: MODEL, input: 'Say hello', instructions: 'Be brief.' });
    expect(paths(oldSim)).toEqual(['POST /v1/responses', 'POST /v1/chat/completions', 'POST /v1/chat/completions']);
    expect(oldSim.requests.filter((r) => r.path.startsWith('/v1/')).map((r) => r.body)).toEqual([
      { model: MODEL, input: 'Say hello' },
      { model: MODEL, messages: [{ role: 'user', content: 'Say hello' }] },
      {
        model: MODEL,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Say hello' },
        ],
      },
    ]);
    for (const [r, instructions, input] of [
      [first, null, 2],
      [second, 'Be brief.', 4],
    ] as const) {
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.text.endsWith('}\n')).toBe(true);
      expect(r.json).toEqual({
        ...TRANSLATED_DEFAULTS,
        id: expect.stringMatching(/^resp_[0-9A-Za-z]{24}$/),
        completed_at: Math.floor(T0 / 1000),
        status: 'completed',
        incomplete_details: null,
        instructions,
        output: [
          {
            id: expect.stringMatching(/^msg_[0-9A-Za-z]{24}$/),
            type: 'message',
            status: 'completed',
            role: 'assistant',
            content: [{ type: 'output_text', text: 't0 t1 t2 t3 t4 t5 t6 t7 ', annotations: [], logprobs: [] }],
          },
        ],
        usage: {
          input_tokens: input,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 8,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: input + 8,
        },
      });
    }
    // Counted as any exchange, from the chat usage: once each, the retried one too.
    const usage = ((await d.manage('GET', '/v1/keys?instance=old')).json as { usage: Record<string, unknown> }[])[0]!
      .usage;
    expect(usage).toMatchObject({ requests: 2, promptTokens: 6, completionTokens: 16, errors: 0 });
    // An upgraded server is asked again once the 404 is old.
    d.clock.advance(ROUTE_MISSING_MS + 1);
    await fetch(`${oldSimUrl}/_sim/requests`, { method: 'DELETE' });
    expect((await post(keys.old!, { model: MODEL, input: 'Say hello' })).status).toBe(200);
    expect(paths(oldSim)).toEqual(['POST /v1/responses', 'POST /v1/chat/completions']);
  });

  it('a streamed first request is sent again translated: the Responses events, usage in response.completed, no [DONE]', async () => {
    const r = await post(keys['old-stream']!, { model: MODEL, input: 'Say hello', stream: true });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(paths(oldSim)).toEqual(['POST /v1/responses', 'POST /v1/chat/completions']);
    expect(oldSim.requests.filter((q) => q.path === '/v1/chat/completions').map((q) => q.body)).toEqual([
      {
        model: MODEL,
        messages: [{ role: 'user', content: 'Say hello' }],
        stream: true,
        stream_options: { include_usage: true },
      },
    ]);
    const events = framesOf(r.text);
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      ...Array<string>(8).fill('response.output_text.delta'),
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.every((e) => e.data.type === e.event)).toBe(true);
    const ids = events.filter((e) => e.data.response !== undefined).map((e) => (e.data.response as { id: string }).id);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
    expect(events.at(-1)!.data.response).toMatchObject({
      status: 'completed',
      usage: { input_tokens: 2, output_tokens: 8, total_tokens: 10 },
    });
    expect(r.text).not.toContain('[DONE]');
  });

  it('a first request that has no chat form is answered with its 400 after the 404, and nothing more is sent', async () => {
    const r = await post(keys['old-bad']!, {
      model: MODEL,
      input: [{ role: 'user', content: [{ type: 'input_file', file_data: 'data:text/plain;base64,aGk=' }] }],
    });
    expect({ status: r.status, json: r.json }).toEqual(
      err(
        400,
        'invalid_request_error',
        'invalid_request',
        "input[0].content[0]: file inputs are not served by this model server. Send the file's text as input_text.",
        'input[0].content[0].type',
      ),
    );
    expect(paths(oldSim)).toEqual(['POST /v1/responses']);
  });
});

describe('in flight', () => {
  it('a revocation mid-stream ends it at once with one Responses error event, the next sequence number, and the upstream aborted', async () => {
    const pending = post(keys.mid!, {
      model: MODEL,
      input: 'Say hello [[sim tokensPerSecond=20 chunks=200]]',
      stream: true,
    });
    await sim.waitFor((r) => r.path === '/v1/responses' && r.chunksSent >= 4);
    const listed = (await d.manage('GET', '/v1/keys?instance=mid')).json as { id: string }[];
    expect((await d.manage('POST', `/v1/keys/${listed[0]!.id}/revoke`, {})).status).toBe(200);
    const r = await pending;
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    const last = frames[frames.length - 1]!;
    const before = frames
      .slice(0, -1)
      .map((f) => JSON.parse(f.split('\n')[1]!.slice(6)) as { sequence_number: number });
    expect(before.length).toBeGreaterThanOrEqual(4);
    expect(last).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'revoked_api_key',
        message:
          'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Generate a new key for a ready instance.',
        param: null,
        sequence_number: before[before.length - 1]!.sequence_number + 1,
      })}`,
    );
    expect(r.text.match(/event: error/g)).toHaveLength(1);
    const upstream = await sim.waitFor((q) => q.path === '/v1/responses' && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it('a hostile endless answer is bounded: an endless event ends the stream with one error event, an endless body is 502', async () => {
    const s = await post(keys.live!, { model: MODEL, input: 'x [[sim fail=endless-line]]', stream: true });
    expect(s.status).toBe(200);
    expect(s.text).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'upstream_error',
        message: 'The model server sent an event larger than 16384 bytes; the stream was ended.',
        param: null,
        sequence_number: 0,
      })}\n\n`,
    );
    const p = await post(keys.live!, { model: MODEL, input: 'x [[sim fail=endless-body]]' });
    expect(p.status).toBe(502);
    expect((p.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'upstream_error',
      message: expect.stringContaining('larger than 262144 bytes'),
    });
    const ended = sent(sim);
    expect(ended).toHaveLength(2);
    await sim.waitFor((q) => q.path === '/v1/responses' && q.endedAt !== null && q.aborted);
  });
});

describe('in flight, translated', () => {
  it('a revocation mid-stream ends it at once with one Responses error event, the next sequence number, and the upstream aborted', async () => {
    // Learned first: the stream then goes straight to chat completions.
    expect((await post(keys['old-mid']!, { model: MODEL, input: 'Say hello' })).status).toBe(200);
    await fetch(`${oldSimUrl}/_sim/requests`, { method: 'DELETE' });
    const pending = post(keys['old-mid']!, {
      model: MODEL,
      input: 'Say hello [[sim tokensPerSecond=20 chunks=200]]',
      stream: true,
    });
    await oldSim.waitFor((r) => r.path === '/v1/chat/completions' && r.chunksSent >= 4);
    const listed = (await d.manage('GET', '/v1/keys?instance=old-mid')).json as { id: string }[];
    expect((await d.manage('POST', `/v1/keys/${listed[0]!.id}/revoke`, {})).status).toBe(200);
    const r = await pending;
    const events = framesOf(r.text);
    const before = events.slice(0, -1);
    expect(before.length).toBeGreaterThanOrEqual(6);
    expect(before.map((e) => e.data.sequence_number)).toEqual(before.map((_, i) => i));
    expect(r.text.endsWith('\n\n')).toBe(true);
    expect(r.text.split('\n\n').at(-2)).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'revoked_api_key',
        message:
          'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Generate a new key for a ready instance.',
        param: null,
        sequence_number: before.length,
      })}`,
    );
    expect(r.text.match(/event: error/g)).toHaveLength(1);
    expect(paths(oldSim)).toEqual(['POST /v1/chat/completions']);
    const upstream = await oldSim.waitFor((q) => q.path === '/v1/chat/completions' && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it('a hostile endless answer is bounded: an endless event or endless text ends the stream with one error event, an endless body is 502', async () => {
    expect((await post(keys['old-hostile']!, { model: MODEL, input: 'Say hello' })).status).toBe(200);
    await fetch(`${oldSimUrl}/_sim/requests`, { method: 'DELETE' });
    const s = await post(keys['old-hostile']!, { model: MODEL, input: 'x [[sim fail=endless-line]]', stream: true });
    expect(s.status).toBe(200);
    expect(s.text).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'upstream_error',
        message: 'The model server sent an event larger than 16384 bytes; the stream was ended.',
        param: null,
        sequence_number: 0,
      })}\n\n`,
    );
    const p = await post(keys['old-hostile']!, { model: MODEL, input: 'x [[sim fail=endless-body]]' });
    expect(p.status).toBe(502);
    expect((p.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'upstream_error',
      message: expect.stringContaining('larger than 262144 bytes'),
    });
    // Well-formed chunks for ever: the text the translation holds is bounded as a plain answer is.
    const e = await post(keys['old-hostile']!, { model: MODEL, input: 'x [[sim fail=endless-body]]', stream: true });
    expect(e.status).toBe(200);
    const events = framesOf(e.text);
    const last = events.at(-1)!;
    expect(last).toEqual({
      event: 'error',
      data: {
        type: 'error',
        code: 'upstream_error',
        message: "The model server's answer is larger than 262144 bytes; the stream was ended.",
        param: null,
        sequence_number: events.length - 1,
      },
    });
    expect(events.filter((f) => f.event === 'error')).toHaveLength(1);
    expect(events.map((f) => f.data.sequence_number)).toEqual(events.map((_, i) => i));
    expect(paths(oldSim)).toEqual(Array<string>(3).fill('POST /v1/chat/completions'));
    // Each upstream request aborted, not read to its end.
    await expect
      .poll(() => oldSim.requests.filter((q) => q.path === '/v1/chat/completions' && q.aborted).length)
      .toBe(3);
  });
});
