import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { upstreamBody, validateChatRequest } from '../../src/wire/chat-request.js';

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

describe('chat request validation (SPEC 2.4 and 8)', () => {
  it('accepts a valid body and forwards the bytes untouched', () => {
    expect(validateChatRequest({ ...base, temperature: 0, top_p: 1, max_tokens: 5 })).toEqual({ model: 'gemma4:26b', stream: false, includeUsage: false, rewritten: null, addUsage: false });
  });

  it.each([
    [{ messages: base.messages }, 'model'],
    [{ ...base, model: 7 }, 'model'],
    [{ ...base, model: '' }, 'model'],
    [{ model: 'm' }, 'messages'],
    [{ ...base, messages: 'hi' }, 'messages'],
    [{ ...base, messages: [] }, 'messages'],
    [{ ...base, messages: ['hi'] }, 'messages[0]'],
    [{ ...base, messages: [{ content: 'x' }] }, 'messages[0].role'],
    [{ ...base, messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role'],
    [{ ...base, messages: [{ role: 'user', content: 'a' }, { role: 'user' }] }, 'messages[1].content'],
    [{ ...base, messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
    [{ ...base, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages[0].content[0].type'],
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
  ])('refuses %j with param %s', (body, param) => {
    const r = refusal(body);
    expect(r.code).toBe('invalid_request');
    expect(r.param).toBe(param);
    expect(r.message.length).toBeGreaterThan(10);
  });

  it('maps developer to system and joins text parts, rewriting only then', () => {
    const r = validateChatRequest({
      model: 'm', messages: [{ role: 'developer', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }],
    });
    expect(r.rewritten).toEqual({ model: 'm', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'ab' }] });
  });

  it('carries max_completion_tokens as max_tokens (Ollama ignores the former)', () => {
    expect(validateChatRequest({ ...base, max_completion_tokens: 9 }).rewritten).toEqual({ ...base, max_tokens: 9 });
  });

  it('asks the upstream for usage on every stream and remembers whether the client asked', () => {
    // No stream_options: the client's bytes are kept, the option spliced in.
    const plain = validateChatRequest({ ...base, stream: true });
    expect(plain).toEqual({ model: 'gemma4:26b', stream: true, includeUsage: false, rewritten: null, addUsage: true });
    const raw = Buffer.from(` \n\t{"model":"gemma4:26b","stream":true,"messages":[{"role":"user","content":"{x}"}]}`);
    const sent = upstreamBody(raw, plain);
    expect(JSON.parse(sent.toString())).toEqual({ model: 'gemma4:26b', stream: true, messages: [{ role: 'user', content: '{x}' }], stream_options: { include_usage: true } });
    // stream_options present (null, or without include_usage): merged by a rewrite, never duplicated.
    expect(validateChatRequest({ ...base, stream: true, stream_options: null })).toEqual({
      model: 'gemma4:26b', stream: true, includeUsage: false, rewritten: { ...base, stream: true, stream_options: { include_usage: true } }, addUsage: false,
    });
    const merged = validateChatRequest({ ...base, stream: true, stream_options: { include_usage: false, extra: 1 } });
    expect(JSON.parse(upstreamBody(Buffer.from('{}'), merged).toString())).toEqual({ ...base, stream: true, stream_options: { include_usage: true, extra: 1 } });
    // Another rewrite (developer role) carries the option in the rewritten body.
    const dev = validateChatRequest({ model: 'm', stream: true, messages: [{ role: 'developer', content: 'x' }] });
    expect(dev.addUsage).toBe(false);
    expect(dev.rewritten).toEqual({ model: 'm', stream: true, messages: [{ role: 'system', content: 'x' }], stream_options: { include_usage: true } });
    const asked = validateChatRequest({ ...base, stream: true, stream_options: { include_usage: true } });
    expect(asked).toEqual({ model: 'gemma4:26b', stream: true, includeUsage: true, rewritten: null, addUsage: false });
    expect(upstreamBody(raw, asked)).toBe(raw);
  });
});
