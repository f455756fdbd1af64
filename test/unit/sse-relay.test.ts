import { describe, expect, it } from 'vitest';
import { SseRelay } from '../../src/wire/sse-relay.js';

const chunk = (id: string, content: string): string =>
  `data: {"id":"${id}","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}]}\n\n`;
const usage =
  'data: {"id":"chatcmpl-7","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n';

describe('SSE relay', () => {
  it('rewrites every id to ours, keeps order, and ends at [DONE]', () => {
    const r = new SseRelay('chatcmpl-ours', true);
    const out = r.push(
      Buffer.from(chunk('chatcmpl-7', 'a') + chunk('chatcmpl-7', 'b') + usage + 'data: [DONE]\n\ndata: {"late":1}\n\n'),
    );
    expect(out).toBe(
      chunk('chatcmpl-ours', 'a') +
        chunk('chatcmpl-ours', 'b') +
        usage.replace('chatcmpl-7', 'chatcmpl-ours') +
        'data: [DONE]\n\n',
    );
    expect(r.done).toBe(true);
    expect(r.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
    expect(r.contentChunks).toBe(2);
  });

  it('keeps usage for accounting but drops the usage chunk when the client did not ask', () => {
    const r = new SseRelay('x', false);
    expect(r.push(Buffer.from(usage))).toBe('');
    expect(r.usage?.completion_tokens).toBe(2);
  });

  it('reassembles frames and multi-byte characters split across reads', () => {
    const whole = Buffer.from(chunk('c', 'héllo ✓') + 'data: [DONE]\n\n');
    const r = new SseRelay('id', false);
    let out = '';
    for (let i = 0; i < whole.length; i += 3) out += r.push(whole.subarray(i, i + 3));
    expect(out).toBe(chunk('id', 'héllo ✓') + 'data: [DONE]\n\n');
  });

  it('accepts CRLF framing and ends at an upstream error event, as our error event', () => {
    const r = new SseRelay('id', false);
    const out = r.push(Buffer.from('data: {"id":"c","choices":[]}\r\n\r\ndata: {"error":{"message":"boom"}}\n\n'));
    expect(out).toBe(
      'data: {"id":"id","choices":[]}\n\ndata: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
    );
    expect(r.sawError).toBe(true);
    expect(r.done).toBe(false);
  });
});
