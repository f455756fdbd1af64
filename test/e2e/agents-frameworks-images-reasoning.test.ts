/**
 * Agent frameworks through ob-proxy, unchanged: the Vercel AI SDK and LangChain's tool calls;
 * then images, structured output and reasoning through the openai SDK, plain and streaming,
 * against a real `ob-proxy serve` and `ob-proxy simulate` (Ollama ≥ 0.32.6, a thinking model).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAMPLE_STRING } from '../../simulator/sim-agent.js';
import { type AgentGateway, GEMMA, QWEN, lastChat, startAgentGateway } from '../helpers/agent-gateway.js';
import { noisePng } from '../helpers/png.js';
import type { ServeProcess } from '../helpers/processes.js';
import { WEATHER } from '../helpers/weather-tool.js';

let gateway: AgentGateway;
let serve: ServeProcess;
let sims: AgentGateway['sims'];
let keys: AgentGateway['keys'];
let sdk: AgentGateway['sdk'];

beforeAll(async () => {
  gateway = await startAgentGateway(['ollama', 'thinking']);
  ({ serve, sims, keys, sdk } = gateway);
}, 60_000);
afterAll(async () => {
  await gateway?.stop();
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
