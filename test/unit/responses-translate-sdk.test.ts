/**
 * The translated Responses wire read by real clients: the openai SDK (create, streamed create,
 * the `responses.stream()` helper), the Vercel AI SDK's `openai.responses(model)` and the Agents
 * SDK, against a local HTTP server that does what the route does in translation: the Responses
 * request through responsesToChat, a scripted chat answer, and that answer back through
 * chatToResponse or the ResponsesStreamTranslator (the chat stream's bytes read with SseDataReader).
 */
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAI } from '@ai-sdk/openai';
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import type { ResponseInputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ObProxyError } from '../../src/errors.js';
import { chatToResponse } from '../../src/apis/responses/from-chat.js';
import { ResponsesStreamTranslator } from '../../src/apis/responses/stream.js';
import { responsesToChat } from '../../src/apis/responses/to-chat.js';
import { SseDataReader } from '../../src/wire/sse-data-reader.js';
import { completion, fixedClock, streamOf } from '../helpers/responses-translate.js';

type Json = Record<string, unknown>;

const MODEL = 'gemma4:26b';
const WEATHER = {
  type: 'object' as const,
  properties: { city: { type: 'string' as const } },
  required: ['city'],
  additionalProperties: false as const,
};

/** What a chat model server would answer to `chat`: a script, so every client sees the same turns. */
function answerFor(chat: Json): { message: Json; finish: string } {
  const messages = chat.messages as Json[];
  const last = messages.at(-1) as Json;
  if (last.role === 'tool') return { message: { content: `Oslo: ${last.content as string}` }, finish: 'stop' };
  if (Array.isArray(chat.tools) && chat.tools.length > 0)
    return {
      message: {
        content: '',
        tool_calls: [
          { id: 'call_oslo0001', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      finish: 'tool_calls',
    };
  if (chat.max_tokens === 3) return { message: { content: 'Hello the' }, finish: 'length' };
  if (chat.reasoning_effort !== undefined || last.content === 'Think, then say hello')
    return { message: { reasoning: 'The user greets; greet back.', content: 'Hello there!' }, finish: 'stop' };
  return { message: { content: 'Hello there!' }, finish: 'stop' };
}

const requests: Json[] = [];
const chats: Json[] = [];
let server: Server;
let baseURL: string;
let n = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (raw += d));
    req.on('end', () => {
      const body = JSON.parse(raw) as Json;
      requests.push(body);
      let t;
      try {
        t = responsesToChat(body);
      } catch (err) {
        const e = err as ObProxyError;
        res.writeHead(e.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(e.toBody()));
        return;
      }
      chats.push(t.chat);
      const ctx = {
        responseId: `resp_${++n}`,
        model: MODEL,
        echo: t.echo,
        createdAt: 1_700_000_000,
        clock: fixedClock,
        ids: (kind: string) => `${kind}_${n}_${Math.random().toString(36).slice(2, 10)}`,
      };
      const { message, finish } = answerFor(t.chat);
      const usage = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };
      if (!t.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify(chatToResponse(completion(message, finish, usage), ctx))}\n`);
        return;
      }
      const translator = new ResponsesStreamTranslator(ctx);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // The chat stream as a model server writes it, read back in 7-byte reads as the route reads it.
      const sse = Buffer.from(
        `${streamOf(message, finish, usage, [1, 4, 9])
          .map((c) => `data: ${JSON.stringify(c)}\n\n`)
          .join('')}data: [DONE]\n\n`,
      );
      const reader = new SseDataReader();
      const failAt = (body.metadata as Json | undefined)?.fail;
      let i = 0;
      for (let at = 0; at < sse.length && !res.writableEnded; at += 7) {
        for (const data of reader.push(sse.subarray(at, at + 7))) {
          if (res.writableEnded) break;
          if (data.done) res.end(translator.end());
          else if (failAt !== undefined && i++ === Number(failAt))
            res.end(translator.error('upstream_unavailable', 'The model server closed the connection.'));
          else res.write(translator.push(data.value));
        }
      }
      if (!res.writableEnded) res.end(translator.end());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

const client = (): OpenAI => new OpenAI({ baseURL, apiKey: 'ob_sk_test', maxRetries: 0 });

describe('the openai SDK reads the translated wire', () => {
  it('responses.create: output_text, usage, status', async () => {
    const r = await client().responses.create({ model: MODEL, input: 'Say hello' });
    expect(r.output_text).toBe('Hello there!');
    expect(r.status).toBe('completed');
    expect(r.usage).toEqual({
      input_tokens: 11,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 18,
    });
    expect(chats.at(-1)).toEqual({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }] });
  });

  it('responses.create with stream: the events, in order, and the completed response', async () => {
    const stream = await client().responses.create({
      model: MODEL,
      input: 'Say hello',
      stream: true,
      reasoning: { effort: 'low' },
    });
    const events: ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const text = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    expect(text).toBe('Hello there!');
    const done = events.at(-1);
    expect(done?.type === 'response.completed' && done.response.output.map((o) => o.type)).toEqual([
      'reasoning',
      'message',
    ]);
    expect(chats.at(-1)).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
      reasoning_effort: 'low',
    });
  });

  it('the responses.stream() helper accepts the reasoning events and gives the final response', async () => {
    const stream = client().responses.stream({ model: MODEL, input: 'Say hello', reasoning: { effort: 'low' } });
    let deltas = '';
    stream.on('response.output_text.delta', (e) => (deltas += e.delta));
    const final = await stream.finalResponse();
    expect(deltas).toBe('Hello there!');
    expect(final.output_text).toBe('Hello there!');
    expect(final.output[0]).toMatchObject({
      type: 'reasoning',
      summary: [{ type: 'summary_text', text: 'The user greets; greet back.' }],
    });
  });

  it('a cut at max_output_tokens: status incomplete, plain and streamed', async () => {
    const plain = await client().responses.create({ model: MODEL, input: 'Say hello', max_output_tokens: 3 });
    expect(plain.status).toBe('incomplete');
    expect(plain.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(plain.output_text).toBe('Hello the');
    const stream = client().responses.stream({ model: MODEL, input: 'Say hello', max_output_tokens: 3 });
    const final = await stream.finalResponse();
    expect(final.status).toBe('incomplete');
    expect(final.output_text).toBe('Hello the');
  });

  it('a function tool, then a second turn carrying the function_call and function_call_output items', async () => {
    const tools = [
      { type: 'function' as const, name: 'get_weather', description: 'Weather', parameters: WEATHER, strict: true },
    ];
    const first = await client().responses.create({ model: MODEL, input: 'Weather in Oslo?', tools });
    const calls = first.output.filter((o) => o.type === 'function_call');
    expect(calls).toEqual([
      {
        id: expect.stringMatching(/^fc_/) as unknown,
        type: 'function_call',
        status: 'completed',
        call_id: 'call_oslo0001',
        name: 'get_weather',
        arguments: '{"city":"Oslo"}',
      },
    ]);
    expect(first.output_text).toBe('');
    expect(first.tools).toEqual(tools);

    const input: ResponseInputItem[] = [
      { role: 'user', content: 'Weather in Oslo?' },
      ...(first.output as ResponseInputItem[]),
      { type: 'function_call_output', call_id: 'call_oslo0001', output: '{"temp":3}' },
    ];
    const second = await client().responses.create({ model: MODEL, input, tools });
    expect(second.output_text).toBe('Oslo: {"temp":3}');
    expect(chats.at(-1)?.messages).toEqual([
      { role: 'user', content: 'Weather in Oslo?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_oslo0001', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_oslo0001', content: '{"temp":3}' },
    ]);
  });

  it('an error event mid-stream raises in the SDK, after the events before it', async () => {
    const stream = await client().responses.create({
      model: MODEL,
      input: 'Say hello',
      stream: true,
      metadata: { fail: '3' },
    });
    const seen: string[] = [];
    const err = await (async () => {
      try {
        for await (const e of stream) seen.push(e.type);
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toContain('The model server closed the connection.');
    expect(seen).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
    ]);
  });

  it('a refused request is a BadRequestError naming the param', async () => {
    const err = await client()
      .responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools[0].type');
  });
});

describe("the AI SDK's openai.responses(model) reads the translated wire", () => {
  const provider = (): ReturnType<typeof createOpenAI> => createOpenAI({ baseURL, apiKey: 'ob_sk_test' });
  const tools = {
    get_weather: tool({
      description: 'Weather for a city',
      inputSchema: jsonSchema<{ city: string }>(WEATHER),
      execute: ({ city }) => Promise.resolve({ city, temp: 3 }),
    }),
  };

  it('generateText with a tool runs two steps to its answer', async () => {
    const result = await generateText({
      model: provider().responses(MODEL),
      tools,
      stopWhen: stepCountIs(3),
      prompt: 'Weather in Oslo?',
      providerOptions: { openai: { store: false } },
      maxRetries: 0,
    });
    expect(result.steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(result.text).toBe('Oslo: {"city":"Oslo","temp":3}');
    expect(result.totalUsage.inputTokens).toBe(22);
  });

  it('streamText with a tool and reasoning streams the final text', async () => {
    const streamed = streamText({
      model: provider().responses(MODEL),
      tools,
      stopWhen: stepCountIs(3),
      prompt: 'Weather in Oslo?',
      providerOptions: { openai: { store: false } },
      maxRetries: 0,
    });
    let text = '';
    for await (const part of streamed.textStream) text += part;
    expect(text).toBe('Oslo: {"city":"Oslo","temp":3}');
    expect((await streamed.steps).map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);

    const thinking = streamText({
      model: provider().responses(MODEL),
      prompt: 'Think, then say hello',
      providerOptions: { openai: { store: false } },
      maxRetries: 0,
    });
    let said = '';
    for await (const part of thinking.textStream) said += part;
    expect(said).toBe('Hello there!');
    expect(await thinking.reasoningText).toBe('The user greets; greet back.');
  });
});

describe('the Agents SDK (OpenAIResponsesModel) reads the translated wire', () => {
  it('an agent with a function tool runs to its final answer in two model calls', async () => {
    setTracingDisabled(true);
    const before = chats.length;
    const cities: string[] = [];
    const agent = new Agent({
      name: 'weather',
      instructions: 'Answer with the weather.',
      model: new OpenAIResponsesModel(client(), MODEL),
      tools: [
        agentTool({
          name: 'get_weather',
          description: 'Weather for a city',
          parameters: z.object({ city: z.string() }),
          execute: ({ city }) => {
            cities.push(city);
            return Promise.resolve('{"temp":3}');
          },
        }),
      ],
    });
    const result = await run(agent, 'Weather in Oslo?');
    expect(result.finalOutput).toBe('Oslo: {"temp":3}');
    expect(cities).toEqual(['Oslo']);
    expect(chats.length - before).toBe(2);
    expect((chats.at(-1)?.messages as Json[]).map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
  });
});
