/**
 * POST /v1/responses through `inject()` (docs/contract.md §6) to a model server without the
 * route: learned from its 404, that request sent again translated to chat completions, later
 * ones sent so at once, and the route asked again once the 404 is old; the answer, whole or
 * streamed, in the Responses shape with OpenAI's defaults, and the same promises as a
 * passthrough (usage, revocation mid-stream, bounds on a hostile answer). What the simulator
 * received is asserted for each case.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { ROUTE_MISSING_MS } from '../../daemon/data-plane/route-support.js';
import { type Answer, type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { postResponses, readyInstance } from '../helpers/inproc-responses.js';
import { refusal as err } from '../helpers/status-and-json.js';

let d: Inproc;
let oldSim: Simulator;
let oldSimUrl: string;
const keys: Record<string, string> = {};

const post = (key: string | null, body: unknown): Promise<Answer> => postResponses(d, key, body);

beforeAll(async () => {
  d = await buildInproc({ bodyLimit: 64 * 1024, maxFrameBytes: 16 * 1024, maxAnswerBytes: 256 * 1024 });
  ({ sim: oldSim, url: oldSimUrl } = await startSim({ responses: false }));
  for (const id of ['old', 'old-stream', 'old-bad', 'old-mid', 'old-resent', 'old-hostile'])
    keys[id] = await readyInstance(d, id, oldSimUrl);
});

afterAll(async () => {
  await d?.close();
  await oldSim?.close();
});

beforeEach(async () => {
  await fetch(`${oldSimUrl}/_sim/requests`, { method: 'DELETE' });
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
          'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
        param: null,
        sequence_number: before.length,
      })}`,
    );
    expect(r.text.match(/event: error/g)).toHaveLength(1);
    expect(paths(oldSim)).toEqual(['POST /v1/chat/completions']);
    const upstream = await oldSim.waitFor((q) => q.path === '/v1/chat/completions' && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it('a first stream, sent again translated, is still ended by a revocation: the exchange stays in flight across the resend', async () => {
    const pending = post(keys['old-resent']!, {
      model: MODEL,
      input: 'Say hello [[sim tokensPerSecond=20 chunks=200]]',
      stream: true,
    });
    await oldSim.waitFor((r) => r.path === '/v1/chat/completions' && r.chunksSent >= 4);
    const listed = (await d.manage('GET', '/v1/keys?instance=old-resent')).json as { id: string }[];
    expect((await d.manage('POST', `/v1/keys/${listed[0]!.id}/revoke`, {})).status).toBe(200);
    const r = await pending;
    const events = framesOf(r.text);
    const before = events.slice(0, -1);
    expect(before.length).toBeGreaterThanOrEqual(6);
    expect(events.at(-1)).toEqual({
      event: 'error',
      data: {
        type: 'error',
        code: 'revoked_api_key',
        message:
          'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
        param: null,
        sequence_number: before.length,
      },
    });
    expect(r.text.match(/event: error/g)).toHaveLength(1);
    expect(paths(oldSim)).toEqual(['POST /v1/responses', 'POST /v1/chat/completions']);
    const upstream = await oldSim.waitFor((q) => q.path === '/v1/chat/completions' && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it("a first stream, sent again translated, is still ended by its model server's silence: the watch goes to the relay that carries it", async () => {
    // A daemon of its own, whose idle time-out is short enough to wait for.
    const quick = await buildInproc({ idleTimeoutMs: 1000 });
    try {
      const key = await readyInstance(quick, 'old-silent', oldSimUrl);
      await fetch(`${oldSimUrl}/_sim/requests`, { method: 'DELETE' });
      const r = await postResponses(quick, key, {
        model: MODEL,
        input: 'Say hello [[sim fail=hang-mid-stream chunks=50]]',
        stream: true,
      });
      const events = framesOf(r.text);
      const before = events.slice(0, -1);
      expect(before.length).toBeGreaterThanOrEqual(1);
      expect(events.at(-1)).toEqual({
        event: 'error',
        data: {
          type: 'error',
          code: 'upstream_timeout',
          message: expect.any(String) as string,
          param: null,
          sequence_number: before.length,
        },
      });
      expect(paths(oldSim)).toEqual(['POST /v1/responses', 'POST /v1/chat/completions']);
      const upstream = await oldSim.waitFor((q) => q.path === '/v1/chat/completions' && q.endedAt !== null);
      expect(upstream.aborted).toBe(true);
    } finally {
      await quick.close();
    }
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
