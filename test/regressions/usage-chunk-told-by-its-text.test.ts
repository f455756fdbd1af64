/**
 * Regression (found by the relay's property test on agents' streams): the slow path
 * told a usage chunk by the text `"usage":{` and an error event by `{"error"`. A server that
 * writes JSON with spaces (Python's json.dumps: `"usage": {`) or a key with escapes
 * (`"\u0075sage"`) had its usage chunk forwarded to clients that had not asked for it, and its
 * tokens went uncounted (the relay fell back to counting events); an error event not starting
 * with `{"error"` was forwarded as an ordinary chunk, so the stream went on and the client got a
 * second error event at the end. Every event the slow path sees is now parsed and judged by what
 * it holds; a usage chunk the client asked for keeps its bytes.
 */
import { describe, expect, it } from 'vitest';
import { SseRelay } from '../../src/wire/sse-relay.js';

const content =
  'data: {"id":"up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n';
const ours = content.replace('"id":"up"', '"id":"ours"');

describe.each([
  ['fast path', undefined],
  ['slow path', null],
] as const)('%s', (_name, shapes) => {
  it('a usage chunk written with spaces is counted and not forwarded unasked', () => {
    const relay = new SseRelay('ours', false, shapes);
    const out = relay.push(
      Buffer.from(
        `${content}data: {"id": "up", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}\n\ndata: [DONE]\n\n`,
      ),
    );
    expect(out).toBe(`${ours}data: [DONE]\n\n`);
    expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
  });

  it('a usage key with escapes is a usage key', () => {
    const relay = new SseRelay('ours', false, shapes);
    const out = relay.push(
      Buffer.from(
        `${content}data: {"id":"up","choices":[],"\\u0075sage":{"prompt_tokens":3,"completion_tokens":2}}\n\n`,
      ),
    );
    expect(out).toBe(ours);
    expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2 });
  });

  it('usage on a content chunk (vLLM continuous usage) is counted, and removed unless asked', () => {
    const relay = new SseRelay('ours', false, shapes);
    const out = relay.push(
      Buffer.from(
        'data: {"id":"up","choices":[{"index":0,"delta":{"content":"x"}}], "usage": {"prompt_tokens":3,"completion_tokens":1}}\n\n',
      ),
    );
    expect(JSON.parse(out.slice(6))).toEqual({ id: 'ours', choices: [{ index: 0, delta: { content: 'x' } }] });
    expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 1 });
  });

  it('a usage chunk the client asked for leaves with its bytes, only the id replaced', () => {
    const relay = new SseRelay('ours', true, shapes);
    const usage =
      'data: {"id":"up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"note":"\\u00e9\\/"}}\n\n';
    expect(relay.push(Buffer.from(usage))).toBe(usage.replace('"id":"up"', '"id":"ours"'));
  });

  it('an error event is one whatever its spelling: the relay stops there', () => {
    for (const data of [
      '{"\\u0065rror":{"message":"boom"}}',
      '{"id":"up","error":{"message":"boom"}}',
      '{ "error" : {"message":"boom"}}',
    ]) {
      const relay = new SseRelay('ours', false, shapes);
      expect(relay.push(Buffer.from(`data: ${data}\n\n${content}`))).toBe(
        'data: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
      );
      expect(relay.sawError).toBe(true);
    }
  });

  it("an `error` the client's SDK would not throw on (null, false, empty) is an ordinary event", () => {
    const relay = new SseRelay('ours', false, shapes);
    expect(relay.push(Buffer.from('data: {"id":"up","error":null,"choices":[]}\n\n'))).toBe(
      'data: {"id":"ours","error":null,"choices":[]}\n\n',
    );
    expect(relay.sawError).toBe(false);
  });
});
