/**
 * The clients of legacy completions and of Anthropic's Messages API, unchanged, against a daemon
 * built in process and listening on 127.0.0.1:0, in front of the simulator's /v1/completions and
 * /v1/messages (docs/contract.md §6): the openai SDK's `completions.create` with `suffix` (an
 * editor's fill-in-the-middle), plain and streamed; the `@anthropic-ai/sdk` that Claude Code is
 * built on, `messages.create` plain and streamed, a tool call and its tool_result turn, with the
 * key in `x-api-key` (apiKey) and in `Authorization: Bearer` (authToken). What the simulator
 * received is asserted: the body as sent, Anthropic's version header, and never the client's key.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RecordedRequest, Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let simBase = '';
let base = '';
let key: string;

async function usage(): Promise<{ promptTokens: number; completionTokens: number; estimatedTokens: number }> {
  const r = (await d.manage('GET', '/v1/usage')).json as {
    packs: { total: { promptTokens: number; completionTokens: number; estimatedTokens: number } }[];
  };
  return r.packs[0]!.total;
}

const received = (path: string): RecordedRequest[] => sim.requests.filter((r) => r.path === path);

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simBase } = await startSim({ chunks: 3 }));
  await d.daemon.listen();
  base = d.daemon.ctx.baseUrl;
  expect((await d.manage('POST', '/v1/instances', { id: 'gpu', model: MODEL, endpoint: simBase })).status).toBe(201);
  key = (
    (await d.manage('POST', '/v1/instances/gpu/ready', { probe: false })).json as { defaultKey: { secret: string } }
  ).defaultKey.secret;
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

beforeEach(async () => {
  await fetch(`${simBase}/_sim/requests`, { method: 'DELETE' });
});

describe('the openai SDK: completions.create with suffix', () => {
  const client = (): OpenAI => new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });

  it('plain: our cmpl- id, the text and usage as the model server gave them', async () => {
    const r = await client().completions.create({
      model: MODEL,
      prompt: 'def add(a, b):\n    ',
      suffix: '\n\nprint(add(1, 2))',
      max_tokens: 64,
      temperature: 0,
    });
    expect(r).toEqual({
      id: expect.stringMatching(/^cmpl-[0-9A-Za-z]{24}$/),
      object: 'text_completion',
      created: expect.any(Number),
      model: MODEL,
      system_fingerprint: 'fp_ollama',
      choices: [{ text: 't0 t1 t2 ', index: 0, finish_reason: 'stop' }],
      usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 },
    });
    const [up] = received('/v1/completions');
    expect(up!.body).toEqual({
      model: MODEL,
      prompt: 'def add(a, b):\n    ',
      suffix: '\n\nprint(add(1, 2))',
      max_tokens: 64,
      temperature: 0,
    });
    expect(up!.headers.authorization).toBeUndefined();
  });

  it('streamed: each chunk with one id of ours, no usage chunk unasked, yet usage asked of the model server and counted', async () => {
    const before = await usage();
    const stream = await client().completions.create({
      model: MODEL,
      prompt: 'function greet(',
      suffix: ') {}',
      stream: true,
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^cmpl-[0-9A-Za-z]{24}$/);
    expect(chunks.map((c) => [c.choices[0]?.text, c.choices[0]?.finish_reason, 'usage' in c])).toEqual([
      ['t0 ', null, false],
      ['t1 ', null, false],
      ['t2 ', null, false],
      ['', 'stop', false],
    ]);
    expect(received('/v1/completions')[0]!.body).toEqual({
      stream_options: { include_usage: true },
      model: MODEL,
      prompt: 'function greet(',
      suffix: ') {}',
      stream: true,
    });
    const after = await usage();
    // The simulator's count (3 words of prompt and suffix), reported in its usage chunk: no estimate.
    expect({
      prompt: after.promptTokens - before.promptTokens,
      completion: after.completionTokens - before.completionTokens,
      estimated: after.estimatedTokens - before.estimatedTokens,
    }).toEqual({ prompt: 3, completion: 3, estimated: 0 });
  });
});

describe('the @anthropic-ai/sdk: messages.create', () => {
  const weather: Anthropic.Tool = {
    name: 'get_weather',
    description: 'The weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  };

  for (const how of ['apiKey (x-api-key)', 'authToken (Authorization: Bearer)'] as const) {
    const client = (): Anthropic =>
      how.startsWith('apiKey')
        ? new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 })
        : new Anthropic({ baseURL: base, apiKey: null, authToken: key, maxRetries: 0 });

    it(`plain, the key in ${how}: our msg_ id, the content and usage as sent; the key never forwarded`, async () => {
      const r = await client().messages.create({
        model: MODEL,
        max_tokens: 256,
        system: 'Be brief.',
        messages: [{ role: 'user', content: 'Say hello' }],
      });
      expect(r).toEqual({
        id: expect.stringMatching(/^msg_[0-9A-Za-z]{24}$/),
        type: 'message',
        role: 'assistant',
        model: MODEL,
        content: [{ type: 'text', text: 't0 t1 t2 ' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 4, output_tokens: 3 },
      });
      const [up] = received('/v1/messages');
      expect(up!.body).toEqual({
        model: MODEL,
        max_tokens: 256,
        system: 'Be brief.',
        messages: [{ role: 'user', content: 'Say hello' }],
      });
      expect(up!.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(up!.headers['x-api-key']).toBeUndefined();
      expect(up!.headers.authorization).toBeUndefined();
      expect(JSON.stringify(up!.headers)).not.toContain(key);
    });
  }

  it('streamed: the SDK’s events in Ollama’s order, one id of ours, the final message assembled', async () => {
    const stream = client().messages.stream({
      model: MODEL,
      max_tokens: 256,
      messages: [{ role: 'user', content: 'Say hello' }],
    });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const final = await stream.finalMessage();
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(final).toMatchObject({
      id: expect.stringMatching(/^msg_[0-9A-Za-z]{24}$/),
      content: [{ type: 'text', text: 't0 t1 t2 ' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 2, output_tokens: 3 },
    });
    expect(received('/v1/messages')[0]!.body).toMatchObject({ stream: true });

    function client(): Anthropic {
      return new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
    }
  });

  it('a tool call, then its tool_result turn, streamed: the input assembled by the SDK, then the final answer', async () => {
    const client = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'What is the weather in Zürich?' }];
    const first = await client.messages
      .stream({ model: MODEL, max_tokens: 256, tools: [weather], messages })
      .finalMessage();
    expect(first.stop_reason).toBe('tool_use');
    const call = first.content[0] as Anthropic.ToolUseBlock;
    expect(call).toEqual({
      type: 'tool_use',
      id: expect.stringMatching(/^call_/),
      name: 'get_weather',
      input: { city: 'Zürich' },
    });
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21 °C, sunny' }] });
    const second = await client.messages.create({ model: MODEL, max_tokens: 256, tools: [weather], messages });
    expect(second.content).toEqual([{ type: 'text', text: 'Final answer from get_weather: 21 °C, sunny' }]);
    const sent = received('/v1/messages').map((r) => r.body as { messages: unknown[] });
    expect(sent).toHaveLength(2);
    expect(sent[1]!.messages).toEqual([
      { role: 'user', content: 'What is the weather in Zürich?' },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: call.id, name: 'get_weather', input: { city: 'Zürich' } }],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21 °C, sunny' }] },
    ]);
  });

  it('errors reach the SDK as Anthropic errors: its class, status, Anthropic’s type and our code', async () => {
    const bad = new Anthropic({ baseURL: base, apiKey: 'ob_sk_nope', maxRetries: 0 });
    const e = await bad.messages
      .create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((e as InstanceType<typeof Anthropic.APIError>).error).toEqual({
      type: 'error',
      error: {
        type: 'authentication_error',
        message:
          'The API key is not valid. Check that it was copied whole; if it was, ask whoever gave you the key for a new one.',
        code: 'invalid_api_key',
      },
    });
    const good = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
    const t = await good.messages
      // The cap the gate charges: the one field of this body it refuses.
      .create({ model: MODEL, max_tokens: 0, messages: [{ role: 'user', content: 'x' }] })
      .catch((x: unknown) => x);
    expect(t).toBeInstanceOf(Anthropic.BadRequestError);
    expect((t as InstanceType<typeof Anthropic.APIError>).error).toEqual({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: 'max_tokens must be an integer from 1 to 9007199254740991.',
        code: 'invalid_request',
      },
    });
    expect(received('/v1/messages')).toHaveLength(0);
  });
});
