/**
 * Agents through ob-proxy, unchanged: the openai SDK's tool loops, the Vercel AI SDK,
 * LangChain, images, structured output and reasoning, plain and streaming, against a real
 * `ob-proxy serve` and `ob-proxy simulate` (Ollama ≥ 0.32.6, a thinking model, and vLLM's wire).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAMPLE_STRING } from '../../simulator/sim-agent.js';
import { noisePng } from '../helpers/png.js';
import {
  type ServeProcess,
  type SimProcess,
  type SimRequest,
  cliJson,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';

const GEMMA = 'gemma4:26b';
const QWEN = 'qwen3.6:27b';
const WEATHER: {
  type: 'object';
  properties: Record<string, { type: 'string'; description: string }>;
  required: string[];
  additionalProperties: false;
} = {
  type: 'object',
  properties: { city: { type: 'string', description: 'The city' } },
  required: ['city'],
  additionalProperties: false,
};
const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER } },
];
const ARGS = JSON.stringify({ city: SAMPLE_STRING });

let serve: ServeProcess;
type Server = 'ollama' | 'thinking' | 'vllm' | 'old';
const sims: Record<Server, SimProcess> = {} as never;
const keys: Record<Server, string> = {} as never;

beforeAll(async () => {
  const home = await tmpHome();
  [sims.ollama, sims.thinking, sims.vllm, sims.old, serve] = await Promise.all([
    startSimulate([GEMMA]),
    startSimulate([QWEN], ['--reasoning']),
    startSimulate([GEMMA], ['--flavor', 'vllm']),
    startSimulate([QWEN], ['--flavor', 'ollama-old', '--reasoning']),
    startServe(home),
  ]);
  for (const [name, model] of [
    ['ollama', GEMMA],
    ['thinking', QWEN],
    ['vllm', GEMMA],
    ['old', QWEN],
  ] as const) {
    await cliJson(['instances', 'add', name, '--model', model, '--endpoint', sims[name].url], home);
    keys[name] = (
      await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', name], home)
    ).defaultKey.secret;
  }
}, 60_000);
afterAll(async () => {
  await Promise.all([serve.stop(), ...Object.values(sims).map((s) => s.stop())]);
});

const sdk = (which: keyof typeof keys): OpenAI =>
  new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: keys[which], maxRetries: 0 });
const lastChat = async (sim: SimProcess): Promise<SimRequest> =>
  (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
/** What JSON makes of a value: what went over the wire. */
const wire = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe('the openai SDK', () => {
  it('completes a tool loop, plain: the assistant turn goes back exactly as the SDK returned it', async () => {
    const client = sdk('ollama');
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Zürich?' }];
    const first = await client.chat.completions.create({ model: GEMMA, messages, tools: TOOLS });
    expect(first.choices).toEqual([
      {
        index: 0,
        finish_reason: 'tool_calls',
        message: {
          role: 'assistant',
          content: '',
          tool_calls: [
            {
              id: expect.stringMatching(/^[A-Za-z0-9]{32}$/),
              index: 0,
              type: 'function',
              function: { name: 'get_weather', arguments: ARGS },
            },
          ],
        },
      },
    ]);
    const call = first.choices[0]!.message.tool_calls![0]!;
    messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '{"temp":3}' });
    const second = await client.chat.completions.create({ model: GEMMA, messages, tools: TOOLS });
    expect(second.choices).toEqual([
      {
        index: 0,
        finish_reason: 'stop',
        message: { role: 'assistant', content: 'Final answer from the tool: {"temp":3}' },
      },
    ]);
    expect((await lastChat(sims.ollama)).body).toEqual(wire({ model: GEMMA, messages, tools: TOOLS }));
  });

  it("completes a tool loop, streaming, through the SDK's stream helper (role, index, finish_reason all present)", async () => {
    const client = sdk('ollama');
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Zürich?' }];
    const first = await client.chat.completions.stream({ model: GEMMA, messages, tools: TOOLS }).finalChatCompletion();
    const msg = first.choices[0]!.message;
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    expect(msg.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^[A-Za-z0-9]{32}$/),
        type: 'function',
        function: { name: 'get_weather', arguments: ARGS },
      },
    ]);
    const calls = msg.tool_calls as { id: string; function: { name: string; arguments: string } }[];
    messages.push({
      role: 'assistant',
      content: msg.content,
      tool_calls: calls.map(({ id, function: f }) => ({
        id,
        type: 'function' as const,
        function: { name: f.name, arguments: f.arguments },
      })),
    });
    messages.push({ role: 'tool', tool_call_id: msg.tool_calls![0]!.id, content: 'sunny' });
    const chunks: string[] = [];
    const stream = client.chat.completions.stream({
      model: GEMMA,
      messages,
      tools: TOOLS,
      stream_options: { include_usage: true },
    });
    stream.on('content', (delta) => chunks.push(delta));
    const second = await stream.finalChatCompletion();
    expect(chunks.join('')).toBe('Final answer from the tool: sunny');
    expect(second.choices[0]!.message.content).toBe('Final answer from the tool: sunny');
    expect(second.usage).toEqual({
      prompt_tokens: expect.any(Number),
      completion_tokens: 6,
      total_tokens: expect.any(Number),
    });
  });

  it("runs runTools to the end: the SDK calls the function with the model's arguments and sends its result back", async () => {
    const seen: unknown[] = [];
    const runner = sdk('ollama').chat.completions.runTools({
      model: GEMMA,
      messages: [{ role: 'user', content: 'Weather?' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'Weather for a city',
            parameters: WEATHER,
            parse: JSON.parse,
            function: (args: unknown) => {
              seen.push(args);
              return { temp: -4 };
            },
          },
        },
      ],
    });
    expect(await runner.finalContent()).toBe('Final answer from the tool: {"temp":-4}');
    expect(seen).toEqual([{ city: SAMPLE_STRING }]);
  });

  it("reassembles vLLM's tool call deltas (id and name first, arguments in fragments)", async () => {
    const client = sdk('vllm');
    const deltas: unknown[] = [];
    const stream = client.chat.completions.stream({
      model: GEMMA,
      messages: [{ role: 'user', content: 'Weather?' }],
      tools: TOOLS,
    });
    stream.on('chunk', (c) => deltas.push(c.choices[0]?.delta.tool_calls));
    const done = await stream.finalChatCompletion();
    expect((done.choices[0]!.message.tool_calls![0] as { function: unknown }).function).toEqual({
      name: 'get_weather',
      arguments: ARGS,
    });
    expect(deltas.filter((d) => d !== undefined).length).toBeGreaterThan(3);
    const plain = await client.chat.completions.create({
      model: GEMMA,
      messages: [{ role: 'user', content: 'Weather?' }],
      tools: TOOLS,
    });
    expect(plain.choices[0]).toEqual({
      index: 0,
      logprobs: null,
      finish_reason: 'tool_calls',
      stop_reason: null,
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: expect.stringMatching(/^chatcmpl-tool-/),
            type: 'function',
            function: { name: 'get_weather', arguments: ARGS },
          },
        ],
      },
    });
  });

  it("reads older Ollama's stream (role on every chunk, the finish reason on the last one), reasoning and tool call included", async () => {
    const client = sdk('old');
    const done = await client.chat.completions
      .stream({ model: QWEN, messages: [{ role: 'user', content: 'Weather?' }], tools: TOOLS })
      .finalChatCompletion();
    expect(done.choices[0]!.finish_reason).toBe('tool_calls');
    expect(done.choices[0]!.message).toMatchObject({
      role: 'assistant',
      tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: ARGS } }],
    });
    const text = await client.chat.completions
      .stream({ model: QWEN, messages: [{ role: 'user', content: 'Hi' }], reasoning_effort: 'none' })
      .finalContent();
    expect(text).toBe('t0 t1 t2 t3 t4 t5 t6 t7 ');
  });
});

describe('agent frameworks', () => {
  it('the Vercel AI SDK runs generateText with an executing tool over two steps, and streamText with tools', async () => {
    const provider = createOpenAICompatible({ name: 'ob-proxy', baseURL: `${serve.baseUrl}/v1`, apiKey: keys.ollama });
    const calls: unknown[] = [];
    const tools = {
      get_weather: tool({
        description: 'Weather for a city',
        inputSchema: jsonSchema<{ city: string }>(WEATHER),
        execute: ({ city }) => {
          calls.push(city);
          return Promise.resolve({ temp: 7 });
        },
      }),
    };
    const result = await generateText({
      model: provider(GEMMA),
      tools,
      stopWhen: stepCountIs(3),
      prompt: 'Weather in Zürich?',
      maxRetries: 0,
    });
    expect(calls).toEqual([SAMPLE_STRING]);
    expect(result.steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(result.text).toBe('Final answer from the tool: {"temp":7}');

    const streamed = streamText({
      model: provider(GEMMA),
      tools,
      stopWhen: stepCountIs(3),
      prompt: 'Weather?',
      maxRetries: 0,
    });
    let text = '';
    for await (const part of streamed.textStream) text += part;
    expect(text).toBe('Final answer from the tool: {"temp":7}');
    expect(calls).toEqual([SAMPLE_STRING, SAMPLE_STRING]);
  });

  it('LangChain ChatOpenAI.bindTools round-trips a ToolMessage', async () => {
    const llm = new ChatOpenAI({
      model: GEMMA,
      apiKey: keys.ollama,
      configuration: { baseURL: `${serve.baseUrl}/v1` },
      maxRetries: 0,
    });
    const bound = llm.bindTools([
      { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER } },
    ]);
    const human = new HumanMessage('Weather in Zürich?');
    const ai = await bound.invoke([human]);
    expect(ai.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^[A-Za-z0-9]{32}$/),
        name: 'get_weather',
        args: { city: SAMPLE_STRING },
        type: 'tool_call',
      },
    ]);
    const answer = await bound.invoke([
      human,
      ai,
      new ToolMessage({ content: 'cold', tool_call_id: ai.tool_calls![0]!.id! }),
    ]);
    expect(answer.content).toBe('Final answer from the tool: cold');
    const sent = (await lastChat(sims.ollama)).body as { messages: { role: string; tool_call_id?: string }[] };
    expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(sent.messages[2]!.tool_call_id).toBe(ai.tool_calls![0]!.id);
  });
});

describe('images, structured output and reasoning', () => {
  it('an image_url data URL (a real 1.1 MB PNG) reaches the model server byte for byte; an http URL is refused by it, in our shape', async () => {
    const png = noisePng(600);
    expect(png.length).toBeGreaterThan(1_000_000);
    const url = `data:image/png;base64,${png.toString('base64')}`;
    const client = sdk('ollama');
    const r = await client.chat.completions.create({
      model: GEMMA,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url, detail: 'high' } },
          ],
        },
      ],
    });
    expect(r.choices[0]!.message.content).toBe('t0 t1 t2 t3 t4 t5 t6 t7 ');
    const got = (await lastChat(sims.ollama)).body as { messages: { content: { image_url?: { url: string } }[] }[] };
    expect(got.messages[0]!.content[1]!.image_url!.url === url).toBe(true);
    expect(Buffer.from(got.messages[0]!.content[1]!.image_url!.url.slice(22), 'base64').equals(png)).toBe(true);

    const e = await client.chat.completions
      .create({
        model: GEMMA,
        messages: [
          {
            role: 'user',
            content: [{ type: 'image_url', image_url: { url: 'http://169.254.169.254/latest/meta-data' } }],
          },
        ],
      })
      .catch((err: unknown) => err);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as InstanceType<typeof OpenAI.APIError>).error).toEqual({
      message:
        'Model server error (HTTP 400): image URLs are not currently supported, please use base64 encoded data instead',
      type: 'api_error',
      code: 'upstream_error',
      param: null,
    });
  });

  it("response_format json_schema: the answer is the model server's JSON, parsed by the SDK", async () => {
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, temp: { type: 'number' }, rain: { type: 'boolean' } },
      required: ['city', 'temp', 'rain'],
    };
    const r = await sdk('ollama').chat.completions.create({
      model: GEMMA,
      messages: [{ role: 'user', content: 'Weather as JSON' }],
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema, strict: true } },
    });
    expect(JSON.parse(r.choices[0]!.message.content!)).toEqual({ city: SAMPLE_STRING, temp: 2.5, rain: true });
  });

  it('a reasoning stream reaches the client event for event, only the id replaced; reasoning_effort none turns it off', async () => {
    const body = {
      model: QWEN,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Think, then answer.' }],
    };
    const direct = await (
      await fetch(`${sims.thinking.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    ).text();
    const proxied = await (
      await fetch(`${serve.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.thinking}` },
        body: JSON.stringify(body),
      })
    ).text();
    const norm = (t: string): string[] =>
      t
        .split('\n\n')
        .filter((f) => f !== '')
        .map((f) => f.replace(/"id":"chatcmpl-[^"]*"/, '"id":"X"').replace(/"created":\d+/, '"created":0'));
    expect(norm(proxied)).toEqual(norm(direct));
    const ids = new Set([...proxied.matchAll(/"id":"(chatcmpl-[^"]*)"/g)].map((m) => m[1]));
    expect(ids.size).toBe(1);
    expect(proxied).toContain('"reasoning":"r0 "');

    const client = sdk('thinking');
    const thought = await client.chat.completions.create({
      model: QWEN,
      messages: [{ role: 'user', content: 'Think.' }],
    });
    expect(thought.choices[0]!.message).toEqual({ role: 'assistant', content: 't0 t1 t2 t3 ', reasoning: 'r0 r1 r2 ' });
    expect(thought.usage?.completion_tokens).toBe(7);
    const none = await client.chat.completions.create({
      model: QWEN,
      messages: [{ role: 'user', content: 'Answer.' }],
      reasoning_effort: 'none',
    });
    expect(none.choices[0]!.message).toEqual({ role: 'assistant', content: 't0 t1 t2 t3 t4 t5 t6 t7 ' });
  });
});
