import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { upstreamBody, validateChatRequest } from '../../src/apis/chat/request.js';

const base = { model: 'gemma4:26b', messages: [{ role: 'user', content: 'hi' }] };

function refusal(body: Record<string, unknown>): { code: string; param: string | null; message: string } {
  try {
    validateChatRequest(body);
  } catch (err) {
    if (err instanceof ObProxyError) return { code: err.code, param: err.param, message: err.message };
    throw err;
  }
  throw new Error('accepted');
}

const NO_MEDIA = { parts: 0, chars: 0 };

describe('chat request validation (docs/contract.md §3.2)', () => {
  it('accepts a valid body and forwards the bytes untouched', () => {
    expect(validateChatRequest({ ...base, temperature: 0, top_p: 1, max_tokens: 5 })).toEqual({
      model: 'gemma4:26b',
      stream: false,
      includeUsage: false,
      rewritten: null,
      addUsage: false,
      media: NO_MEDIA,
      completionCap: 5,
      temperature: 0,
      topP: 1,
    });
  });

  it.each([
    [{ messages: base.messages }, 'model'],
    [{ ...base, model: 7 }, 'model'],
    [{ ...base, model: '' }, 'model'],
    [{ model: 'm' }, 'messages'],
    [{ ...base, messages: 'hi' }, 'messages'],
    [{ ...base, messages: ['hi'] }, 'messages[0]'],
    [{ ...base, messages: [{ content: 'x' }] }, 'messages[0].role'],
    [{ ...base, messages: [{ role: 7, content: 'x' }] }, 'messages[0].role'],
    [{ ...base, temperature: 2.01 }, 'temperature'],
    [{ ...base, temperature: -0.1 }, 'temperature'],
    [{ ...base, temperature: '1' }, 'temperature'],
    [{ ...base, top_p: 1.5 }, 'top_p'],
    [{ ...base, max_tokens: 1.5 }, 'max_tokens'],
    [{ ...base, max_tokens: 0 }, 'max_tokens'],
    [{ ...base, max_completion_tokens: -3 }, 'max_completion_tokens'],
    [{ ...base, n: 2 }, 'n'],
    [{ ...base, stream: 'yes' }, 'stream'],
    [{ ...base, stream: true, stream_options: { include_usage: 'yes' } }, 'stream_options.include_usage'],
  ])('refuses %j with param %s: a field the gate reads', (body, param) => {
    const r = refusal(body);
    expect(r.code).toBe('invalid_request');
    expect(r.param).toBe(param);
    expect(r.message.length).toBeGreaterThan(10);
  });

  // What the model server alone judges: roles, turns, parts, tool calls and every field the gate
  // does not read reach it as the client wrote them, whatever a stricter server would say.
  it.each([
    { ...base, messages: [] },
    { ...base, messages: [{ role: 'critic', content: 'x' }] },
    { ...base, messages: [{ role: 'tool', content: 'x' }] },
    { ...base, messages: [{ role: 'user', content: null }] },
    { ...base, messages: [{ role: 'user', content: 5 }] },
    { ...base, messages: [{ role: 'user', content: 'a' }, { role: 'user' }] },
    { ...base, messages: [{ role: 'user', content: 'x', tool_calls: [] }] },
    {
      ...base,
      messages: [{ role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'f' } }] }],
    },
    { ...base, messages: [{ role: 'system', content: [{ type: 'image_url', image_url: 'data:,' }] }] },
    { ...base, messages: [{ role: 'user', content: [{ type: 'video', video: {} }] }] },
    { ...base, frequency_penalty: 2.5, presence_penalty: -3, top_logprobs: 21, logprobs: 'yes' },
    { ...base, stop: ['a', 'b', 'c', 'd', 'e'], seed: 1.5, logit_bias: { 50256: -101 }, user: 7 },
    { ...base, reasoning_effort: 3, metadata: { run: 1 }, parallel_tool_calls: 'no' },
    { ...base, tools: [{ type: 'retrieval' }], tool_choice: 'always' },
    { ...base, tools: [{ type: 'function', function: { name: 'has space', parameters: 'x' } }] },
    { ...base, response_format: { type: 'xml' }, context_management: { edits: [] }, unknown_field: [1] },
  ])('passes %j to the model server untouched', (body) => {
    const r = validateChatRequest(body);
    expect(r.rewritten).toBeNull();
    expect(r.addUsage).toBe(false);
  });

  it('maps developer to system, rewriting only then; content parts go as sent', () => {
    const parts = [
      { type: 'text', text: 'a' },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
    ];
    const r = validateChatRequest({
      model: 'm',
      messages: [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: parts },
      ],
    });
    expect(r.rewritten).toEqual({
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: parts },
      ],
    });
    expect(validateChatRequest({ model: 'm', messages: [{ role: 'user', content: parts }] }).rewritten).toBeNull();
  });

  it('accepts an agent loop as the SDKs write it back, and every documented field, forwarding the bytes untouched', () => {
    const body = {
      model: 'm',
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'You call tools.' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather?' },
            { type: 'image_url', image_url: 'data:image/png;base64,AAAA' },
            { type: 'input_audio', input_audio: { data: 'UklG', format: 'wav' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          reasoning: 'I should call it.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', name: 'get_weather', content: '{"temp":3}' },
        { role: 'assistant', content: null, refusal: 'I cannot.' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'It is 3 °C.' },
            { type: 'refusal', refusal: 'no' },
          ],
        },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'd',
            parameters: { type: 'object', properties: { city: { type: 'string' } } },
            strict: true,
          },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object' }, strict: true } },
      stop: ['\n\n'],
      seed: 7,
      frequency_penalty: -2,
      presence_penalty: 2,
      logit_bias: { 50256: -100 },
      logprobs: true,
      top_logprobs: 20,
      user: 'u1',
      reasoning_effort: 'none',
      metadata: { run: 'a' },
      some_new_field: { anything: [1] },
    };
    expect(validateChatRequest(body)).toEqual({
      model: 'm',
      stream: false,
      includeUsage: false,
      rewritten: null,
      addUsage: false,
      // The image and audio parts, and their 26 + 4 characters: what the prompt estimate counts apart.
      media: { parts: 2, chars: 30 },
      completionCap: null,
      temperature: null,
      topP: null,
    });
  });

  it('carries max_completion_tokens as max_tokens (Ollama ignores the former)', () => {
    expect(validateChatRequest({ ...base, max_completion_tokens: 9 }).rewritten).toEqual({ ...base, max_tokens: 9 });
    expect(validateChatRequest({ ...base, max_completion_tokens: 9 }).completionCap).toBe(9);
  });

  it('both caps given: max_completion_tokens wins, as vLLM and OpenAI read it, and goes upstream alone', () => {
    const both = validateChatRequest({ ...base, max_tokens: 4, max_completion_tokens: 9 });
    expect(both.completionCap).toBe(9);
    // One field upstream: Ollama (max_tokens only) and vLLM (max_completion_tokens first) read the same cap.
    expect(both.rewritten).toEqual({ ...base, max_tokens: 9 });
    const lower = validateChatRequest({ ...base, max_tokens: 400, max_completion_tokens: 1 });
    expect([lower.completionCap, lower.rewritten]).toEqual([1, { ...base, max_tokens: 1 }]);
    // A null max_completion_tokens is no cap: max_tokens holds, and the bytes go as they came.
    const onlyTokens = validateChatRequest({ ...base, max_tokens: 4, max_completion_tokens: null });
    expect([onlyTokens.completionCap, onlyTokens.rewritten]).toEqual([4, null]);
  });

  it('asks the upstream for usage on every stream and remembers whether the client asked', () => {
    // No stream_options: the client's bytes are kept, the option spliced in.
    const plain = validateChatRequest({ ...base, stream: true });
    expect(plain).toEqual({
      model: 'gemma4:26b',
      stream: true,
      includeUsage: false,
      rewritten: null,
      addUsage: true,
      media: NO_MEDIA,
      completionCap: null,
      temperature: null,
      topP: null,
    });
    const raw = Buffer.from(` \n\t{"model":"gemma4:26b","stream":true,"messages":[{"role":"user","content":"{x}"}]}`);
    const sent = upstreamBody(raw, plain);
    expect(JSON.parse(sent.toString())).toEqual({
      model: 'gemma4:26b',
      stream: true,
      messages: [{ role: 'user', content: '{x}' }],
      stream_options: { include_usage: true },
    });
    // stream_options present (null, or without include_usage): merged by a rewrite, never duplicated.
    expect(validateChatRequest({ ...base, stream: true, stream_options: null })).toEqual({
      model: 'gemma4:26b',
      stream: true,
      includeUsage: false,
      rewritten: { ...base, stream: true, stream_options: { include_usage: true } },
      addUsage: false,
      media: NO_MEDIA,
      completionCap: null,
      temperature: null,
      topP: null,
    });
    const merged = validateChatRequest({ ...base, stream: true, stream_options: { include_usage: false, extra: 1 } });
    expect(JSON.parse(upstreamBody(Buffer.from('{}'), merged).toString())).toEqual({
      ...base,
      stream: true,
      stream_options: { include_usage: true, extra: 1 },
    });
    // Another rewrite (developer role) carries the option in the rewritten body.
    const dev = validateChatRequest({ model: 'm', stream: true, messages: [{ role: 'developer', content: 'x' }] });
    expect(dev.addUsage).toBe(false);
    expect(dev.rewritten).toEqual({
      model: 'm',
      stream: true,
      messages: [{ role: 'system', content: 'x' }],
      stream_options: { include_usage: true },
    });
    const asked = validateChatRequest({ ...base, stream: true, stream_options: { include_usage: true } });
    expect(asked).toEqual({
      model: 'gemma4:26b',
      stream: true,
      includeUsage: true,
      rewritten: null,
      addUsage: false,
      media: NO_MEDIA,
      completionCap: null,
      temperature: null,
      topP: null,
    });
    expect(upstreamBody(raw, asked)).toBe(raw);
  });
});
