/**
 * A Responses request translated to a chat completions request (responsesToChat): turns, items,
 * sampling fields, tools, tool_choice and text.format carried across, what the answer must echo,
 * and a chat request the chat route itself accepts as built.
 */
import { describe, expect, it } from 'vitest';
import { validateChatRequest } from '../../src/apis/chat/request.js';
import { responsesToChat } from '../../src/apis/responses/to-chat.js';
import { MODEL, weather } from '../helpers/responses-request.js';

const DEFAULT_ECHO = {
  instructions: null,
  tools: [],
  toolChoice: 'auto',
  parallelToolCalls: true,
  text: { format: { type: 'text' } },
  temperature: 1,
  topP: 1,
  maxOutputTokens: null,
  reasoning: null,
  metadata: {},
  truncation: 'disabled',
};

describe('Responses request → chat completions request', () => {
  it('a string input is one user turn; nothing else is invented', () => {
    expect(responsesToChat({ model: MODEL, input: 'Say hello' })).toEqual({
      chat: { model: MODEL, messages: [{ role: 'user', content: 'Say hello' }] },
      stream: false,
      echo: DEFAULT_ECHO,
    });
  });

  it('instructions lead as a system turn, and every sampling field is carried across', () => {
    const t = responsesToChat({
      model: MODEL,
      instructions: 'Be brief.',
      input: 'Hi',
      max_output_tokens: 64,
      temperature: 0,
      top_p: 0.5,
      parallel_tool_calls: false,
      metadata: { team: 'a' },
      user: 'u-1',
      safety_identifier: 's-1',
      prompt_cache_key: 'k-1',
      reasoning: { effort: 'low', summary: 'auto' },
      store: false,
      include: ['reasoning.encrypted_content'],
      truncation: 'auto',
      service_tier: 'flex',
    });
    expect(t).toEqual({
      chat: {
        model: MODEL,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
        max_tokens: 64,
        temperature: 0,
        top_p: 0.5,
        parallel_tool_calls: false,
        metadata: { team: 'a' },
        user: 'u-1',
        safety_identifier: 's-1',
        prompt_cache_key: 'k-1',
        reasoning_effort: 'low',
      },
      stream: false,
      echo: {
        ...DEFAULT_ECHO,
        instructions: 'Be brief.',
        parallelToolCalls: false,
        temperature: 0,
        topP: 0.5,
        maxOutputTokens: 64,
        reasoning: { effort: 'low', summary: 'auto' },
        metadata: { team: 'a' },
        truncation: 'auto',
      },
    });
  });

  it('a stream asks the model server for its usage chunk', () => {
    expect(responsesToChat({ model: MODEL, input: 'Hi', stream: true })).toEqual({
      chat: {
        model: MODEL,
        messages: [{ role: 'user', content: 'Hi' }],
        stream: true,
        stream_options: { include_usage: true },
      },
      stream: true,
      echo: DEFAULT_ECHO,
    });
    expect(validateChatRequest(responsesToChat({ model: MODEL, input: 'Hi', stream: true }).chat)).toMatchObject({
      stream: true,
      includeUsage: true,
      rewritten: null,
    });
  });

  it('message items of every role and part type become chat turns', () => {
    const t = responsesToChat({
      model: MODEL,
      input: [
        { role: 'developer', content: 'Rules.' },
        { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'More rules.' }] },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'Look: ' },
            { type: 'input_text', text: 'this.' },
          ],
        },
        {
          type: 'message',
          role: 'assistant',
          id: 'msg_1',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Seen.', annotations: [] }],
        },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'And this?' },
            { type: 'input_image', image_url: 'data:image/png;base64,iVBO', detail: 'low' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'original' },
          ],
        },
        { role: 'assistant', content: [{ type: 'refusal', refusal: 'I cannot.' }] },
      ],
    });
    expect(t.chat.messages).toEqual([
      { role: 'system', content: 'Rules.' },
      { role: 'system', content: 'More rules.' },
      { role: 'user', content: 'Look: this.' },
      { role: 'assistant', content: 'Seen.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'And this?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBO', detail: 'low' } },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        ],
      },
      { role: 'assistant', content: 'I cannot.' },
    ]);
    expect(validateChatRequest(t.chat)).toMatchObject({ rewritten: null, media: { parts: 2 } });
  });

  it('a multi-turn conversation with function calls and their outputs, reasoning fed back', () => {
    const t = responsesToChat({
      model: MODEL,
      instructions: 'Use tools.',
      tools: [weather, { type: 'function', name: 'get_time' }],
      input: [
        { role: 'user', content: 'Weather and time in Oslo and Bergen?' },
        {
          type: 'reasoning',
          id: 'rs_1',
          summary: [{ type: 'summary_text', text: 'Need two calls.' }],
          encrypted_content: 'Need two calls.',
        },
        {
          type: 'function_call',
          id: 'fc_1',
          call_id: 'call_a',
          name: 'get_weather',
          arguments: '{"city":"Oslo"}',
          status: 'completed',
        },
        { type: 'function_call', call_id: 'call_b', name: 'get_weather', arguments: '{"city":"Bergen"}' },
        { type: 'function_call_output', call_id: 'call_a', output: '{"temp":3}' },
        { type: 'function_call_output', call_id: 'call_b', output: [{ type: 'input_text', text: '{"temp":5}' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Now the time.' }] },
        { type: 'function_call', call_id: 'call_c', name: 'get_time', arguments: '' },
        { type: 'function_call_output', call_id: 'call_c', output: '12:00' },
        { type: 'reasoning', summary: [], encrypted_content: 'Summarise.' },
        { role: 'assistant', content: 'Oslo 3, Bergen 5, noon.' },
        { role: 'user', content: 'Thanks' },
      ],
    });
    expect(t.chat).toEqual({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Use tools.' },
        { role: 'user', content: 'Weather and time in Oslo and Bergen?' },
        {
          role: 'assistant',
          content: null,
          reasoning: 'Need two calls.',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
            { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Bergen"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: '{"temp":3}' },
        { role: 'tool', tool_call_id: 'call_b', content: '{"temp":5}' },
        {
          role: 'assistant',
          content: 'Now the time.',
          tool_calls: [{ id: 'call_c', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'call_c', content: '12:00' },
        { role: 'assistant', content: 'Oslo 3, Bergen 5, noon.', reasoning: 'Summarise.' },
        { role: 'user', content: 'Thanks' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'Weather of a city',
            parameters: weather.parameters,
            strict: true,
          },
        },
        { type: 'function', function: { name: 'get_time' } },
      ],
    });
    expect(t.echo.tools).toEqual([
      weather,
      { type: 'function', name: 'get_time', description: null, parameters: null, strict: null },
    ]);
    // What goes upstream is a chat request the chat route itself accepts, forwarded as built.
    expect(validateChatRequest(t.chat)).toMatchObject({ model: MODEL, stream: false, rewritten: null });
  });

  it('reasoning with no assistant turn after it is left out', () => {
    const t = responsesToChat({
      model: MODEL,
      input: [
        { role: 'user', content: 'Hi' },
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'hm' }] },
      ],
    });
    expect(t.chat.messages).toEqual([{ role: 'user', content: 'Hi' }]);
  });

  it.each([
    ['none', 'none'],
    ['auto', 'auto'],
    ['required', 'required'],
    [
      { type: 'function', name: 'get_weather' },
      { type: 'function', function: { name: 'get_weather' } },
    ],
  ])('tool_choice %j → %j', (choice, chatChoice) => {
    const t = responsesToChat({ model: MODEL, input: 'x', tools: [weather], tool_choice: choice });
    expect(t.chat.tool_choice).toEqual(chatChoice);
    expect(t.echo.toolChoice).toEqual(choice);
  });

  it('tool_choice allowed_tools narrows the tools sent and keeps its mode', () => {
    const t = responsesToChat({
      model: MODEL,
      input: 'x',
      tools: [weather, { type: 'function', name: 'get_time' }],
      tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'get_time' }] },
    });
    expect(t.chat.tools).toEqual([{ type: 'function', function: { name: 'get_time' } }]);
    expect(t.chat.tool_choice).toBe('required');
  });

  it('text.format json_schema and json_object become response_format; verbosity is carried', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    const js = responsesToChat({
      model: MODEL,
      input: 'x',
      text: { format: { type: 'json_schema', name: 'thing', schema, strict: true }, verbosity: 'low' },
    });
    expect(js.chat.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'thing', schema, strict: true },
    });
    expect(js.chat.verbosity).toBe('low');
    expect(js.echo.text).toEqual({
      format: { type: 'json_schema', name: 'thing', schema, strict: true },
      verbosity: 'low',
    });
    const jo = responsesToChat({ model: MODEL, input: 'x', text: { format: { type: 'json_object' } } });
    expect(jo.chat.response_format).toEqual({ type: 'json_object' });
    const plain = responsesToChat({ model: MODEL, input: 'x', text: { format: { type: 'text' } } });
    expect(plain.chat.response_format).toBeUndefined();
  });
});
