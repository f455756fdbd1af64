import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { validateChatRequest } from '../../src/wire/chat-request.js';
import { type TranslateOptions, responsesToChat } from '../../src/wire/responses-to-chat.js';

const MODEL = 'gemma4:26b';

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

function refusal(
  body: Record<string, unknown>,
  options?: TranslateOptions,
): { code: string; status: number; param: string | null; message: string } {
  try {
    responsesToChat(body, options);
  } catch (err) {
    if (err instanceof ObProxyError)
      return { code: err.code, status: err.status, param: err.param, message: err.message };
    throw err;
  }
  throw new Error('accepted');
}

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: true,
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

  it('other tools: refused by default naming the tool, or left out', () => {
    const body = {
      model: MODEL,
      input: 'x',
      tools: [weather, { type: 'web_search' }, { type: 'namespace', name: 'crm', tools: [] }],
    };
    const r = refusal(body);
    expect(r).toMatchObject({ code: 'invalid_request', status: 400, param: 'tools[1].type' });
    expect(r.message).toContain('"web_search"');
    const t = responsesToChat(body, { otherTools: 'drop' });
    expect(t.chat.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Weather of a city',
          parameters: weather.parameters,
          strict: true,
        },
      },
    ]);
    expect(t.echo.tools).toEqual([weather]);
  });

  it.each([
    [{ input: 'x' }, 'model'],
    [{ model: '', input: 'x' }, 'model'],
    [{ model: MODEL }, 'input'],
    [{ model: MODEL, input: 7 }, 'input'],
    [{ model: MODEL, input: [] }, 'input'],
    [{ model: MODEL, input: ['hi'] }, 'input[0]'],
    [{ model: MODEL, input: [{ content: 'x' }] }, 'input[0].type'],
    [{ model: MODEL, input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
    [{ model: MODEL, input: [{ type: 'web_search_call', id: 'ws_1' }] }, 'input[0].type'],
    [{ model: MODEL, input: [{ role: 'tool', content: 'x' }] }, 'input[0].role'],
    [{ model: MODEL, input: [{ role: 'user' }] }, 'input[0].content'],
    [{ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'input[0].content[0].text'],
    [{ model: MODEL, input: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] }, 'input[0].content[0].type'],
    [
      { model: MODEL, input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] },
      'input[0].content[0].type',
    ],
    [
      { model: MODEL, input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1' }] }] },
      'input[0].content[0].image_url',
    ],
    [
      { model: MODEL, input: [{ role: 'system', content: [{ type: 'input_image', image_url: 'data:,' }] }] },
      'input[0].content[0].type',
    ],
    [
      { model: MODEL, input: [{ role: 'user', content: [{ type: 'refusal', refusal: 'no' }] }] },
      'input[0].content[0].type',
    ],
    [{ model: MODEL, input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, 'input[0].call_id'],
    [{ model: MODEL, input: [{ type: 'function_call', call_id: 'c', arguments: '{}' }] }, 'input[0].name'],
    [{ model: MODEL, input: [{ type: 'function_call', call_id: 'c', name: 'f' }] }, 'input[0].arguments'],
    [
      { model: MODEL, input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{"a":' }] },
      'input[0].arguments',
    ],
    [{ model: MODEL, input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
    [{ model: MODEL, input: [{ type: 'function_call_output', call_id: 'c' }] }, 'input[0].output'],
    [
      {
        model: MODEL,
        input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: 'x' }] }],
      },
      'input[0].output[0]',
    ],
    [{ model: MODEL, input: [{ type: 'reasoning', summary: 'x' }] }, 'input[0].summary'],
    [{ model: MODEL, input: 'x', instructions: 3 }, 'instructions'],
    [{ model: MODEL, input: 'x', tools: {} }, 'tools'],
    [{ model: MODEL, input: 'x', tools: [{ type: 'function' }] }, 'tools[0].name'],
    [{ model: MODEL, input: 'x', tools: [{ type: 'function', name: 'a b' }] }, 'tools[0].name'],
    [{ model: MODEL, input: 'x', tools: [{ type: 'function', name: 'f', parameters: [] }] }, 'tools[0].parameters'],
    [{ model: MODEL, input: 'x', tools: [{ name: 'f' }] }, 'tools[0].type'],
    [{ model: MODEL, input: 'x', tool_choice: 'any' }, 'tool_choice'],
    [{ model: MODEL, input: 'x', tool_choice: { type: 'function', name: 'nope' } }, 'tool_choice.name'],
    [{ model: MODEL, input: 'x', tool_choice: { type: 'web_search_preview' } }, 'tool_choice.type'],
    [
      { model: MODEL, input: 'x', tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'mcp' }] } },
      'tool_choice.tools[0]',
    ],
    [{ model: MODEL, input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
    [{ model: MODEL, input: 'x', max_output_tokens: 1.5 }, 'max_output_tokens'],
    [{ model: MODEL, input: 'x', temperature: 3 }, 'temperature'],
    [{ model: MODEL, input: 'x', top_p: '1' }, 'top_p'],
    [{ model: MODEL, input: 'x', stream: 'yes' }, 'stream'],
    [{ model: MODEL, input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
    [{ model: MODEL, input: 'x', text: { format: { type: 'json_schema', name: 'x' } } }, 'text.format.schema'],
    [{ model: MODEL, input: 'x', reasoning: { effort: 3 } }, 'reasoning.effort'],
    [{ model: MODEL, input: 'x', metadata: { a: 1 } }, 'metadata.a'],
    [{ model: MODEL, input: 'x', background: true }, 'background'],
    [{ model: MODEL, input: 'x', prompt: { id: 'pmpt_1' } }, 'prompt'],
    [{ model: MODEL, input: 'x', parallel_tool_calls: 1 }, 'parallel_tool_calls'],
  ])('refuses %j at %s', (body, param) => {
    const r = refusal(body as Record<string, unknown>);
    expect(r.code).toBe('invalid_request');
    expect(r.status).toBe(400);
    expect(r.param).toBe(param);
    expect(r.message.startsWith(param.split(/[.[]/)[0] as string)).toBe(true);
  });

  it('says what to do about an item_reference and a file id', () => {
    expect(refusal({ model: MODEL, input: [{ type: 'item_reference', id: 'x' }] }).message).toBe(
      'input[0]: item_reference is not served: this gateway keeps no responses. Send the whole items (with store: false, SDKs send them).',
    );
    expect(
      refusal({ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'f' }] }] }).message,
    ).toBe(
      'input[0].content[0].file_id is not served: this gateway has no file store. Send the image as a data URL in image_url.',
    );
  });
});
