/**
 * The Responses requests responsesToChat refuses: each an `invalid_request` (400) naming the
 * field at fault, tools of other types refused unless told to leave them out, and messages that
 * say what to send instead of an item_reference or a file id.
 */
import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { type TranslateOptions, responsesToChat } from '../../src/apis/responses/to-chat.js';
import { MODEL, weather } from '../helpers/responses-request.js';

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

describe('Responses request → chat completions request', () => {
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
    [{ model: MODEL, input: [{ type: 'function_call', call_id: 'c', arguments: '{}' }] }, 'input[0].name'],
    [{ model: MODEL, input: [{ type: 'function_call', call_id: 'c', name: 'f' }] }, 'input[0].arguments'],
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

  it('translates what chat can express, however unusual: roles, parts, ids, names, metadata', () => {
    const t = responsesToChat({
      model: MODEL,
      input: [
        { role: 'tool', content: 'x' },
        { role: 'system', content: [{ type: 'input_image', image_url: 'data:,' }] },
        { role: 'user', content: [{ type: 'refusal', refusal: 'no' }] },
        { type: 'function_call', name: 'f', arguments: '{"a":' },
        { type: 'function_call_output', name: 'f', namespace: 'shell', output: 'done' },
      ],
      tools: [{ type: 'function', name: 'a b' }],
      metadata: { a: 1 },
    });
    expect(t.chat.messages).toEqual([
      { role: 'tool', content: 'x' },
      { role: 'system', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] },
      { role: 'user', content: 'no' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{"a":' } }],
      },
      { role: 'tool', content: 'done' },
    ]);
    expect(t.chat.tools).toEqual([{ type: 'function', function: { name: 'a b' } }]);
    expect(t.chat.metadata).toEqual({ a: 1 });
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
