/**
 * A chat stream translated to Responses events (ResponsesStreamTranslator): the whole event
 * sequence for text, reasoning, parallel tool calls and refusals, the end by length, error events
 * and their sequence numbers, and a hostile model server; each sequence also read by the openai
 * SDK's accumulator.
 */
import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { ResponsesStreamTranslator } from '../../src/apis/responses/stream.js';
import {
  PLAIN,
  WEATHER_TOOL,
  WITH_TOOLS,
  call,
  message,
  reasoning,
  response,
  text,
  usage,
} from '../helpers/responses-answer-shapes.js';
import { accumulate, translate } from '../helpers/responses-stream-events.js';
import { chunk, contextFor, parseFrames, usageChunk } from '../helpers/responses-translate.js';

type Json = Record<string, unknown>;

const IN_PROGRESS = { status: 'in_progress', completed_at: null, output: [], usage: null };

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
