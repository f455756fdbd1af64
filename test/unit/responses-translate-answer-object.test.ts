/**
 * A plain chat completion translated to a Responses object (chatToResponse): message, reasoning
 * and function_call items, usage in the Responses shape, a cut at the token cap, refusals, the
 * request echoed, and what is not a chat completion refused.
 */
import { describe, expect, it } from 'vitest';
import { chatToResponse } from '../../src/apis/responses/from-chat.js';
import {
  PLAIN,
  WEATHER_TOOL,
  WITH_TOOLS,
  call,
  message,
  reasoning,
  response,
  usage,
} from '../helpers/responses-answer-shapes.js';
import { completion, contextFor } from '../helpers/responses-translate.js';

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
