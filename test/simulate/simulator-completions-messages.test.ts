/**
 * The simulator's POST /v1/completions and POST /v1/messages, in real Ollama's shapes (taken from
 * Ollama 0.33's answers): key order, ids, trailing newlines, stream events, the usage chunks,
 * `[DONE]` on completions only, errors in each API's envelope, and the switches that turn each
 * route off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimulator, type Simulator } from '../../simulator/simulator.js';

let sim: Simulator;
let url: string;

beforeAll(async () => {
  sim = buildSimulator({ models: ['gemma4:26b'], chunks: 3 });
  url = await sim.listen(0);
});
afterAll(async () => sim?.close());

async function post(path: string, body: unknown): Promise<{ status: number; type: string | null; text: string }> {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

describe('POST /v1/completions', () => {
  it('a plain answer: Ollama’s key order, cmpl- id, usage, the trailing newline', async () => {
    const r = await post('/v1/completions', { model: 'gemma4:26b', prompt: 'def add(a, b):', suffix: '\n' });
    expect(r.status).toBe(200);
    expect(r.type).toBe('application/json');
    expect(r.text).toMatch(
      /^\{"id":"cmpl-\d{1,3}","object":"text_completion","created":\d+,"model":"gemma4:26b","system_fingerprint":"fp_ollama","choices":\[\{"text":"t0 t1 t2 ","index":0,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7\}\}\n$/,
    );
  });

  it('a stream: chunks in the struct’s key order, a finish chunk, zero usage on each with include_usage, then [DONE]', async () => {
    const r = await post('/v1/completions', {
      model: 'gemma4:26b',
      prompt: 'Hello',
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    const head = /^data: \{"id":"(cmpl-\d+)","object":"text_completion","created":(\d+),/.exec(frames[0]!)!;
    const [, id, created] = head;
    const tail = (choices: string, usage: string): string =>
      `data: {"id":"${id}","object":"text_completion","created":${created},"choices":${choices},"model":"gemma4:26b","system_fingerprint":"fp_ollama","usage":${usage}}`;
    const zero = '{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}';
    expect(frames).toEqual([
      tail('[{"text":"t0 ","index":0,"finish_reason":null}]', zero),
      tail('[{"text":"t1 ","index":0,"finish_reason":null}]', zero),
      tail('[{"text":"","index":0,"finish_reason":"length"}]', zero),
      tail('[]', '{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}'),
      'data: [DONE]',
    ]);
  });

  it('Go’s decoding and the model check, in Ollama’s envelope', async () => {
    const arr = await post('/v1/completions', { model: 'gemma4:26b', prompt: ['a', 'b'] });
    expect([arr.status, arr.text]).toEqual([
      400,
      '{"error":{"message":"json: cannot unmarshal array into Go struct field CompletionRequest.prompt of type string","type":"invalid_request_error","param":null,"code":null}}',
    ]);
    const nope = await post('/v1/completions', { model: 'nope', prompt: 'x' });
    expect([nope.status, nope.text]).toEqual([
      404,
      '{"error":{"message":"model \'nope\' not found","type":"not_found_error","param":null,"code":null}}\n',
    ]);
  });
});

describe('POST /v1/messages', () => {
  const weather = {
    name: 'get_weather',
    description: 'Weather',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  };

  it('a plain answer: a message with msg_ id, text block, stop reason and usage, the trailing newline', async () => {
    const r = await post('/v1/messages', {
      model: 'gemma4:26b',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Say hello' }],
    });
    expect(r.status).toBe(200);
    const id = /^\{"id":"(msg_[0-9a-f]{24})"/.exec(r.text)![1];
    expect(r.text).toBe(
      `{"id":"${id}","type":"message","role":"assistant","model":"gemma4:26b","content":[{"type":"text","text":"t0 t1 t2 "}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":3}}\n`,
    );
  });

  it('a tool call, then the final answer after its tool_result', async () => {
    const first = JSON.parse(
      (
        await post('/v1/messages', {
          model: 'gemma4:26b',
          max_tokens: 100,
          tools: [weather],
          messages: [{ role: 'user', content: 'Weather in Zürich?' }],
        })
      ).text,
    ) as { content: { id: string }[]; stop_reason: string };
    expect(first.stop_reason).toBe('tool_use');
    const call = first.content[0]!;
    expect(call).toEqual({
      type: 'tool_use',
      id: expect.stringMatching(/^call_[0-9a-f]{8}$/),
      name: 'get_weather',
      input: { city: 'Zürich' },
    });
    const second = JSON.parse(
      (
        await post('/v1/messages', {
          model: 'gemma4:26b',
          max_tokens: 100,
          tools: [weather],
          messages: [
            { role: 'user', content: 'Weather in Zürich?' },
            { role: 'assistant', content: first.content },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
          ],
        })
      ).text,
    ) as { content: unknown[]; stop_reason: string };
    expect(second).toMatchObject({
      content: [{ type: 'text', text: 'Final answer from get_weather: sunny' }],
      stop_reason: 'end_turn',
    });
  });

  it('a stream: event lines kept, Ollama’s order, usage in message_start and message_delta, no [DONE]', async () => {
    const r = await post('/v1/messages', {
      model: 'gemma4:26b',
      max_tokens: 100,
      stream: true,
      messages: [{ role: 'user', content: 'Say hello to everyone' }],
    });
    expect(r.type).toBe('text/event-stream');
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    const id = /"id":"(msg_[0-9a-f]{24})"/.exec(frames[0]!)![1];
    expect(frames).toEqual([
      `event: message_start\ndata: {"type":"message_start","message":{"id":"${id}","type":"message","role":"assistant","model":"gemma4:26b","content":[],"usage":{"input_tokens":5,"output_tokens":0}}}`,
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t0 "}}',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t1 "}}',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t2 "}}',
      'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":4,"output_tokens":3}}',
      'event: message_stop\ndata: {"type":"message_stop"}',
    ]);
  });

  it('Ollama’s refusals, in Anthropic’s envelope with a request_id', async () => {
    const cases: [unknown, number, string, string][] = [
      [
        { model: 'gemma4:26b', messages: [{ role: 'user', content: 'x' }] },
        400,
        'invalid_request_error',
        'max_tokens is required and must be positive',
      ],
      [{ model: 'gemma4:26b', max_tokens: 5, messages: [] }, 400, 'invalid_request_error', 'messages is required'],
      [
        { model: 'gemma4:26b', max_tokens: '5', messages: [] },
        400,
        'invalid_request_error',
        'json: cannot unmarshal string into Go struct field MessagesRequest.max_tokens of type int',
      ],
      [
        { model: 'nope', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] },
        404,
        'not_found_error',
        "model 'nope' not found",
      ],
    ];
    for (const [body, status, type, message] of cases) {
      const r = await post('/v1/messages', body);
      expect({ status: r.status, json: JSON.parse(r.text) as unknown }).toEqual({
        status,
        json: { type: 'error', error: { type, message }, request_id: expect.stringMatching(/^req_[0-9a-f]{24}$/) },
      });
    }
  });
});

it('--no-completions and --no-messages answer each route 404 with Gin’s text', async () => {
  sim.configure({ completions: false, messages: false });
  try {
    for (const path of ['/v1/completions', '/v1/messages']) {
      const r = await post(path, { model: 'gemma4:26b', prompt: 'x', max_tokens: 3, messages: [] });
      expect([r.status, r.text]).toEqual([404, '404 page not found']);
    }
  } finally {
    sim.configure({ completions: true, messages: true });
  }
});
