import fc from 'fast-check';
import { accumulateResponse } from 'openai/lib/responses/ResponseAccumulator';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { chatToResponse } from '../../src/wire/chat-to-responses.js';
import { ResponsesStreamTranslator } from '../../src/wire/responses-stream.js';
import {
  CREATED_AT,
  chunk,
  completion,
  contextFor,
  countingIds,
  parseFrames,
  streamOf,
  usageChunk,
} from '../helpers/responses-translate.js';

type Json = Record<string, unknown>;

const PLAIN = { model: 'gemma4:26b', input: 'Say hello' };
const WEATHER_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};
const WITH_TOOLS = { model: 'gemma4:26b', input: 'Weather in Oslo and Bergen?', tools: [WEATHER_TOOL] };

/** The Responses object of a translated answer to PLAIN, with `over` replacing fields. */
function response(over: Json): Json {
  return {
    id: 'resp_test',
    object: 'response',
    created_at: CREATED_AT,
    completed_at: CREATED_AT + 7,
    status: 'completed',
    incomplete_details: null,
    model: 'gemma4:26b',
    previous_response_id: null,
    instructions: null,
    output: [],
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
    usage: null,
    max_output_tokens: null,
    max_tool_calls: null,
    store: false,
    background: false,
    service_tier: 'default',
    metadata: {},
    safety_identifier: null,
    prompt_cache_key: null,
    ...over,
  };
}

const IN_PROGRESS = { status: 'in_progress', completed_at: null, output: [], usage: null };

function usage(input: number, output: number, reasoning = 0, cached = 0): Json {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

function text(t: string): Json {
  return { type: 'output_text', text: t, annotations: [], logprobs: [] };
}

function message(id: string, t: string, status = 'completed'): Json {
  return { id, type: 'message', status, role: 'assistant', content: [text(t)] };
}

function reasoning(id: string, t: string): Json {
  return { id, type: 'reasoning', summary: [{ type: 'summary_text', text: t }], encrypted_content: t };
}

function call(id: string, callId: string, args: string, status = 'completed'): Json {
  return { id, type: 'function_call', status, call_id: callId, name: 'get_weather', arguments: args };
}

/** Feeds chunks and the end; returns the parsed events, checked for consecutive sequence numbers. */
function translate(request: Json, chunks: unknown[]): { type: string; data: Json }[] {
  const t = new ResponsesStreamTranslator(contextFor(request));
  let out = '';
  for (const c of chunks) out += t.push(c);
  out += t.end();
  const events = parseFrames(out);
  events.forEach((e, i) => expect(e.data.sequence_number).toBe(i));
  expect(t.nextSequence).toBe(events.length);
  return events;
}

/** Runs the events through the openai SDK's own accumulator; returns its snapshot before the last event. */
function accumulate(events: { type: string; data: Json }[]): Response {
  let snapshot: Response | undefined;
  for (const e of events.slice(0, -1))
    snapshot = accumulateResponse(e.data as unknown as ResponseStreamEvent, snapshot);
  const final = accumulateResponse(events.at(-1)?.data as unknown as ResponseStreamEvent, snapshot);
  expect(final.output).toEqual((events.at(-1)?.data.response as Json).output);
  return snapshot as Response;
}

function ev(type: string, fields: Json): Json {
  return { type, ...fields };
}

/** The events without their sequence numbers (checked apart by translate()). */
function strip(events: { type: string; data: Json }[]): Json[] {
  return events.map((e) => {
    const { sequence_number: _, ...rest } = e.data;
    return rest;
  });
}

describe('chat completion → Responses object', () => {
  it('a plain answer: one message item, usage in the Responses shape', () => {
    const answer = completion({ content: 'Hello!' }, 'stop', {
      prompt_tokens: 12,
      completion_tokens: 3,
      total_tokens: 15,
    });
    expect(chatToResponse(answer, contextFor(PLAIN))).toEqual(
      response({ output: [message('msg_1', 'Hello!')], usage: usage(12, 3) }),
    );
  });

  it('reasoning comes first as a reasoning item; usage details are carried', () => {
    const answer = completion({ content: 'Hi.', reasoning_content: 'Greet back.' }, 'stop', {
      prompt_tokens: 20,
      completion_tokens: 9,
      total_tokens: 29,
      prompt_tokens_details: { cached_tokens: 16 },
      completion_tokens_details: { reasoning_tokens: 6 },
    });
    expect(chatToResponse(answer, contextFor(PLAIN))).toEqual(
      response({ output: [reasoning('rs_1', 'Greet back.'), message('msg_1', 'Hi.')], usage: usage(20, 9, 6, 16) }),
    );
  });

  it("tool calls (Ollama's shape, content empty): function_call items and no message item; echoes the tools", () => {
    const answer = completion(
      {
        content: '',
        reasoning: 'Two cities.',
        tool_calls: [
          {
            id: 'call_k3x9a0qz',
            index: 0,
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
          },
          { index: 1, type: 'function', function: { name: 'get_weather', arguments: { city: 'Bergen' } } },
        ],
      },
      'tool_calls',
      { prompt_tokens: 42, completion_tokens: 17, total_tokens: 59 },
    );
    expect(chatToResponse(answer, contextFor(WITH_TOOLS))).toEqual(
      response({
        tools: [WEATHER_TOOL],
        output: [
          reasoning('rs_1', 'Two cities.'),
          call('fc_1', 'call_k3x9a0qz', '{"city":"Oslo"}'),
          call('fc_2', 'call_1', '{"city":"Bergen"}'),
        ],
        usage: usage(42, 17),
      }),
    );
  });

  it('text and tool calls: the message, then the calls', () => {
    const answer = completion(
      {
        content: 'Looking it up.',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
      },
      'tool_calls',
      undefined,
    );
    expect(chatToResponse(answer, contextFor(WITH_TOOLS))?.output).toEqual([
      message('msg_1', 'Looking it up.'),
      call('fc_1', 'c1', '{}'),
    ]);
  });

  it('a cut at the token cap is incomplete, with its reason, and no completed_at', () => {
    const request = { ...PLAIN, max_output_tokens: 4 };
    const answer = completion({ content: 'Hello the' }, 'length', {
      prompt_tokens: 12,
      completion_tokens: 4,
      total_tokens: 16,
    });
    expect(chatToResponse(answer, contextFor(request))).toEqual(
      response({
        status: 'incomplete',
        incomplete_details: { reason: 'max_output_tokens' },
        completed_at: null,
        max_output_tokens: 4,
        output: [message('msg_1', 'Hello the', 'incomplete')],
        usage: usage(12, 4),
      }),
    );
  });

  it('a refusal is a refusal part; an empty answer still has its message', () => {
    const refused = chatToResponse(completion({ content: null, refusal: 'No.' }, 'stop', undefined), contextFor(PLAIN));
    expect(refused?.output).toEqual([
      {
        id: 'msg_1',
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'refusal', refusal: 'No.' }],
      },
    ]);
    const empty = chatToResponse(completion({ content: '' }, null, undefined), contextFor(PLAIN));
    expect(empty?.output).toEqual([message('msg_1', '')]);
    expect(empty?.status).toBe('completed');
  });

  it('echoes the request: instructions, sampling, format, reasoning, metadata', () => {
    const request = {
      model: 'gemma4:26b',
      instructions: 'Be brief.',
      input: 'x',
      temperature: 0.2,
      top_p: 0.9,
      tool_choice: 'none',
      parallel_tool_calls: false,
      text: { format: { type: 'json_object' } },
      reasoning: { effort: 'high' },
      metadata: { a: 'b' },
    };
    const r = chatToResponse(completion({ content: '{}' }, 'stop', undefined), contextFor(request));
    expect(r).toEqual(
      response({
        instructions: 'Be brief.',
        temperature: 0.2,
        top_p: 0.9,
        tool_choice: 'none',
        parallel_tool_calls: false,
        text: { format: { type: 'json_object' } },
        reasoning: { effort: 'high', summary: null },
        metadata: { a: 'b' },
        output: [message('msg_1', '{}')],
      }),
    );
  });

  it('refuses what is not a chat completion, and hostile counts become 0', () => {
    const ctx = contextFor(PLAIN);
    expect(chatToResponse('x', ctx)).toBeNull();
    expect(chatToResponse({ object: 'chat.completion' }, ctx)).toBeNull();
    expect(chatToResponse({ choices: new Array(129).fill({}) }, ctx)).toBeNull();
    const hostile = completion({ content: 'x' }, 'stop', {
      prompt_tokens: -5,
      completion_tokens: '7',
      total_tokens: 1e308,
    });
    expect(chatToResponse(hostile, ctx)?.usage).toBeNull();
    const half = completion({ content: 'x' }, 'stop', { prompt_tokens: 5, completion_tokens: 1.5 });
    expect(chatToResponse(half, ctx)?.usage).toEqual(usage(5, 0));
  });
});

describe('chat stream → Responses events', () => {
  it('streamed text: the whole event sequence', () => {
    const events = translate(PLAIN, [
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Hel' }),
      chunk({ content: 'lo!' }),
      chunk({}, 'stop'),
      usageChunk(12, 3),
    ]);
    const item = { item_id: 'msg_1', output_index: 0, content_index: 0 };
    expect(strip(events)).toEqual([
      ev('response.created', { response: response(IN_PROGRESS) }),
      ev('response.in_progress', { response: response(IN_PROGRESS) }),
      ev('response.output_item.added', {
        output_index: 0,
        item: { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] },
      }),
      ev('response.content_part.added', { ...item, part: text('') }),
      ev('response.output_text.delta', { ...item, delta: 'Hel', logprobs: [] }),
      ev('response.output_text.delta', { ...item, delta: 'lo!', logprobs: [] }),
      ev('response.output_text.done', { ...item, text: 'Hello!', logprobs: [] }),
      ev('response.content_part.done', { ...item, part: text('Hello!') }),
      ev('response.output_item.done', { output_index: 0, item: message('msg_1', 'Hello!') }),
      ev('response.completed', { response: response({ output: [message('msg_1', 'Hello!')], usage: usage(12, 3) }) }),
    ]);
    accumulate(events);
  });

  it('streamed reasoning, then text: a reasoning item with its summary part, then the message', () => {
    const events = translate(PLAIN, [
      chunk({ role: 'assistant', reasoning: 'Think' }),
      chunk({ reasoning: 'ing.' }),
      chunk({ content: 'Hi.' }),
      chunk({}, 'stop'),
      usageChunk(5, 8),
    ]);
    const r = { item_id: 'rs_1', output_index: 0, summary_index: 0 };
    const m = { item_id: 'msg_1', output_index: 1, content_index: 0 };
    expect(strip(events).slice(2)).toEqual([
      ev('response.output_item.added', { output_index: 0, item: { id: 'rs_1', type: 'reasoning', summary: [] } }),
      ev('response.reasoning_summary_part.added', { ...r, part: { type: 'summary_text', text: '' } }),
      ev('response.reasoning_summary_text.delta', { ...r, delta: 'Think' }),
      ev('response.reasoning_summary_text.delta', { ...r, delta: 'ing.' }),
      ev('response.reasoning_summary_text.done', { ...r, text: 'Thinking.' }),
      ev('response.reasoning_summary_part.done', { ...r, part: { type: 'summary_text', text: 'Thinking.' } }),
      ev('response.output_item.done', { output_index: 0, item: reasoning('rs_1', 'Thinking.') }),
      ev('response.output_item.added', {
        output_index: 1,
        item: { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] },
      }),
      ev('response.content_part.added', { ...m, part: text('') }),
      ev('response.output_text.delta', { ...m, delta: 'Hi.', logprobs: [] }),
      ev('response.output_text.done', { ...m, text: 'Hi.', logprobs: [] }),
      ev('response.content_part.done', { ...m, part: text('Hi.') }),
      ev('response.output_item.done', { output_index: 1, item: message('msg_1', 'Hi.') }),
      ev('response.completed', {
        response: response({ output: [reasoning('rs_1', 'Thinking.'), message('msg_1', 'Hi.')], usage: usage(5, 8) }),
      }),
    ]);
    accumulate(events);
  });

  it('parallel tool calls with interleaved argument deltas: one item each, closed at the end in order', () => {
    const events = translate(WITH_TOOLS, [
      chunk({ role: 'assistant', content: null }),
      chunk({
        tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
      chunk({
        tool_calls: [
          { index: 1, id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"ci' } },
        ],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: 'ty":"Bergen"}' } }] }),
      chunk({}, 'tool_calls'),
      usageChunk(30, 20),
    ]);
    const a = { item_id: 'fc_1', output_index: 0 };
    const b = { item_id: 'fc_2', output_index: 1 };
    expect(strip(events).slice(2)).toEqual([
      ev('response.output_item.added', { output_index: 0, item: call('fc_1', 'call_a', '', 'in_progress') }),
      ev('response.function_call_arguments.delta', { ...a, delta: '{"city":' }),
      ev('response.output_item.added', { output_index: 1, item: call('fc_2', 'call_b', '', 'in_progress') }),
      ev('response.function_call_arguments.delta', { ...b, delta: '{"ci' }),
      ev('response.function_call_arguments.delta', { ...a, delta: '"Oslo"}' }),
      ev('response.function_call_arguments.delta', { ...b, delta: 'ty":"Bergen"}' }),
      ev('response.function_call_arguments.done', { ...a, arguments: '{"city":"Oslo"}' }),
      ev('response.output_item.done', { output_index: 0, item: call('fc_1', 'call_a', '{"city":"Oslo"}') }),
      ev('response.function_call_arguments.done', { ...b, arguments: '{"city":"Bergen"}' }),
      ev('response.output_item.done', { output_index: 1, item: call('fc_2', 'call_b', '{"city":"Bergen"}') }),
      ev('response.completed', {
        response: response({
          tools: [WEATHER_TOOL],
          output: [call('fc_1', 'call_a', '{"city":"Oslo"}'), call('fc_2', 'call_b', '{"city":"Bergen"}')],
          usage: usage(30, 20),
        }),
      }),
    ]);
    accumulate(events);
  });

  it("Ollama's whole tool call in one delta, after text: the message closes before the call opens", () => {
    const events = translate(WITH_TOOLS, [
      chunk({ role: 'assistant', content: 'Checking.' }),
      chunk({
        tool_calls: [
          { id: 'call_x', index: 0, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      }),
      chunk({}, 'tool_calls'),
    ]);
    expect(events.map((e) => e.type).slice(2)).toEqual([
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect((events.at(-1)?.data.response as Json).output).toEqual([
      message('msg_1', 'Checking.'),
      call('fc_1', 'call_x', '{"city":"Oslo"}'),
    ]);
    expect((events.at(-1)?.data.response as Json).usage).toBeNull();
    accumulate(events);
  });

  it('a finish by length ends with response.incomplete and the open item incomplete', () => {
    const events = translate({ ...PLAIN, max_output_tokens: 2 }, [
      chunk({ role: 'assistant', content: 'Hel' }),
      chunk({ content: 'lo' }),
      chunk({}, 'length'),
      usageChunk(12, 2),
    ]);
    const last = events.at(-1) as { type: string; data: Json };
    expect(last.type).toBe('response.incomplete');
    expect(last.data.response).toEqual(
      response({
        status: 'incomplete',
        incomplete_details: { reason: 'max_output_tokens' },
        completed_at: null,
        max_output_tokens: 2,
        output: [message('msg_1', 'Hello', 'incomplete')],
        usage: usage(12, 2),
      }),
    );
    expect(events.at(-2)?.data).toMatchObject({ type: 'response.output_item.done', item: { status: 'incomplete' } });
    accumulate(events);
  });

  it('a stream with no text and no calls still answers with an empty message', () => {
    const events = translate(PLAIN, [chunk({ role: 'assistant', content: '' }), chunk({}, 'stop')]);
    expect(events.map((e) => e.type).slice(2)).toEqual([
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect((events.at(-1)?.data.response as Json).output).toEqual([message('msg_1', '')]);
    accumulate(events);
  });

  it('a refusal streams as refusal deltas in a refusal part', () => {
    const events = translate(PLAIN, [
      chunk({ role: 'assistant', refusal: 'I ' }),
      chunk({ refusal: 'cannot.' }),
      chunk({}, 'stop'),
    ]);
    const part = { item_id: 'msg_1', output_index: 0, content_index: 0 };
    expect(strip(events).slice(3, 8)).toEqual([
      ev('response.content_part.added', { ...part, part: { type: 'refusal', refusal: '' } }),
      ev('response.refusal.delta', { ...part, delta: 'I ' }),
      ev('response.refusal.delta', { ...part, delta: 'cannot.' }),
      ev('response.refusal.done', { ...part, refusal: 'I cannot.' }),
      ev('response.content_part.done', { ...part, part: { type: 'refusal', refusal: 'I cannot.' } }),
    ]);
    accumulate(events);
  });

  it('an error event takes the next sequence number and ends the stream', () => {
    const t = new ResponsesStreamTranslator(contextFor(PLAIN));
    const head = parseFrames(t.push(chunk({ role: 'assistant', content: 'Hi' })));
    expect(head.length).toBe(5);
    const frame = t.error('revoked_api_key', 'This API key has been revoked.');
    expect(frame).toBe(
      'event: error\ndata: {"type":"error","code":"revoked_api_key","message":"This API key has been revoked.","param":null,"sequence_number":5}\n\n',
    );
    expect(t.closed).toBe(true);
    expect(t.nextSequence).toBe(6);
    expect(t.push(chunk({ content: 'more' }))).toBe('');
    expect(t.end()).toBe('');
  });

  it('start() sends response.created and response.in_progress before any chunk, once', () => {
    const t = new ResponsesStreamTranslator(contextFor(PLAIN));
    expect(parseFrames(t.start()).map((e) => [e.type, e.data.sequence_number])).toEqual([
      ['response.created', 0],
      ['response.in_progress', 1],
    ]);
    expect(t.start()).toBe('');
    expect(parseFrames(t.push(chunk({ role: 'assistant', content: 'x' })))[0]?.type).toBe('response.output_item.added');
    const cut = new ResponsesStreamTranslator(contextFor(PLAIN));
    cut.start();
    expect(parseFrames(cut.error('upstream_timeout', 'The model server did not answer in time.'))).toEqual([
      {
        type: 'error',
        data: {
          type: 'error',
          code: 'upstream_timeout',
          message: 'The model server did not answer in time.',
          param: null,
          sequence_number: 2,
        },
      },
    ]);
  });

  it('a hostile model server: wrong types are skipped, an error chunk or too many calls throw upstream_error', () => {
    const t = new ResponsesStreamTranslator(contextFor(PLAIN));
    const events = parseFrames(
      t.push(null) +
        t.push({ choices: 'x' }) +
        t.push({ choices: [{ delta: { content: 7, reasoning: {}, tool_calls: 'x' }, finish_reason: 3 }] }) +
        t.push({ choices: [{ delta: { tool_calls: [null, 5] } }] }),
    );
    expect(events.map((e) => e.type)).toEqual(['response.created', 'response.in_progress']);
    expect(t.finished).toBe(false);
    expect(t.contentChunks).toBe(0);

    const err = (() => {
      try {
        t.push({ error: { message: 'llama-server returned invalid tool call arguments' } });
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(ObProxyError);
    expect((err as ObProxyError).code).toBe('upstream_error');

    const many = new ResponsesStreamTranslator(contextFor(WITH_TOOLS));
    const calls = Array.from({ length: 128 }, (_, i) => ({
      index: i,
      id: `c${i}`,
      function: { name: 'f', arguments: '{}' },
    }));
    const sent = parseFrames(many.push(chunk({ tool_calls: calls })));
    expect(sent.length).toBe(2 + 128 * 2);
    expect(() =>
      many.push(chunk({ content: 'x', tool_calls: [{ index: 5, function: { arguments: ' ' } }, { index: 128 }] })),
    ).toThrow('more than 128 tool calls');
    // Nothing of the refused chunk was made: the error event takes the number after the last sent.
    expect(many.nextSequence).toBe(sent.length);

    const first = new ResponsesStreamTranslator(contextFor(PLAIN));
    expect(() => first.push({ error: 'boom' })).toThrow(ObProxyError);
    expect(first.nextSequence).toBe(0);
  });

  it('counts the chunks that carried content, and keeps the last usage reported', () => {
    const t = new ResponsesStreamTranslator(contextFor(PLAIN));
    t.push(chunk({ role: 'assistant', content: '' }));
    t.push(chunk({ reasoning: 'a' }));
    t.push(chunk({ content: 'b' }));
    t.push(chunk({}, 'stop'));
    t.push(usageChunk(3, 2));
    expect(t.contentChunks).toBe(2);
    expect(t.finished).toBe(true);
    expect(t.finishReason).toBe('stop');
    expect(t.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
  });
});

describe('the streamed and the plain translation agree', () => {
  const answer = fc.record({
    reasoning: fc.option(fc.string({ minLength: 1, maxLength: 40 }), { nil: undefined }),
    content: fc.option(fc.string({ minLength: 1, maxLength: 80, unit: 'grapheme' }), { nil: undefined }),
    tool_calls: fc.option(
      fc.array(
        fc.record({
          id: fc.stringMatching(/^call_[a-z0-9]{8}$/),
          type: fc.constant('function'),
          function: fc.record({
            name: fc.constant('get_weather'),
            arguments: fc.json({ maxDepth: 2 }).map((j) => JSON.stringify({ v: JSON.parse(j) as unknown })),
          }),
        }),
        { minLength: 1, maxLength: 3 },
      ),
      { nil: undefined },
    ),
  });

  it('for any answer and any cut of its text into deltas, response.completed equals the plain answer', () => {
    fc.assert(
      fc.property(
        answer,
        fc.constantFrom('stop', 'length', 'tool_calls'),
        fc.array(fc.nat(200), { maxLength: 12 }),
        fc.nat(1000),
        fc.nat(1000),
        (message, finish, cuts, p, c) => {
          const u = { prompt_tokens: p, completion_tokens: c, total_tokens: p + c };
          const plain = chatToResponse(completion(message, finish, u), contextFor(WITH_TOOLS, countingIds()));
          const events = translate(WITH_TOOLS, streamOf(message, finish, u, cuts));
          const last = events.at(-1) as { type: string; data: Json };
          expect(last.type).toBe(finish === 'length' ? 'response.incomplete' : 'response.completed');
          expect(last.data.response).toEqual(plain);
          // The SDK's accumulator, fed the deltas, builds the same output the last event states.
          const snapshot = accumulate(events);
          expect(snapshot.output).toEqual((plain as Json).output);
          // Every delta joined gives the whole text.
          const deltas = events
            .filter((e) => e.type === 'response.output_text.delta')
            .map((e) => e.data.delta as string)
            .join('');
          expect(deltas).toBe(message.content ?? '');
        },
      ),
      { numRuns: 300 },
    );
  });
});
