/**
 * The clients that speak the Responses API, unchanged, against a daemon built in process and
 * listening on 127.0.0.1:0, in front of the simulator's /v1/responses: the openai SDK (plain,
 * streamed, a function tool, a second turn carrying the call and its output), the OpenAI Agents
 * SDK (an agent runs a tool to its final answer in two upstream calls) and the AI SDK's
 * `createOpenAI(...)(model)`, which calls /responses (generateText and streamText, a two-step
 * tool loop). What the simulator received is asserted.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } from '@openai/agents';
import { generateText, jsonSchema, stepCountIs, streamText, tool as aiTool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let base: string;
let key: string;
let client: OpenAI;
let simBase = '';

const sent = (): Record<string, unknown>[] =>
  sim.requests.filter((r) => r.path === '/v1/responses').map((r) => r.body as Record<string, unknown>);

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simBase } = await startSim({ chunks: 3 }));
  await d.daemon.listen();
  base = `${d.daemon.ctx.baseUrl}/v1`;
  expect((await d.manage('POST', '/v1/instances', { id: 'gpu', model: MODEL, endpoint: simBase })).status).toBe(201);
  key = (
    (await d.manage('POST', '/v1/instances/gpu/ready', { probe: false })).json as { defaultKey: { secret: string } }
  ).defaultKey.secret;
  client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 });
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

beforeEach(async () => {
  await fetch(`${simBase}/_sim/requests`, { method: 'DELETE' });
});

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

describe('the openai SDK', () => {
  it('responses.create, plain', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'Say hello' });
    expect(r.id).toMatch(/^resp_[0-9A-Za-z]{24}$/);
    expect(r.output_text).toBe('t0 t1 t2 ');
    expect(r.usage).toMatchObject({ input_tokens: 2, output_tokens: 3 });
    expect(sent()).toEqual([{ model: MODEL, input: 'Say hello' }]);
  });

  it('responses.create, streamed: the events the SDK yields, ending with response.completed', async () => {
    const stream = await client.responses.create({ model: MODEL, input: 'Say hello', stream: true });
    const types: string[] = [];
    let text = '';
    let id = '';
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') id = ev.response.id;
    }
    expect(types[0]).toBe('response.created');
    expect(types[types.length - 1]).toBe('response.completed');
    expect(text).toBe('t0 t1 t2 ');
    expect(id).toMatch(/^resp_[0-9A-Za-z]{24}$/);
  });

  it('a function tool, then a second turn carrying the function_call and its function_call_output', async () => {
    const first = await client.responses.create({ model: MODEL, input: 'Weather in Zürich?', tools: [weather] });
    const call = first.output.find((o) => o.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Zürich"}' });
    if (call?.type !== 'function_call') throw new Error('no call');
    const second = await client.responses.create({
      model: MODEL,
      tools: [weather],
      input: [
        { role: 'user', content: 'Weather in Zürich?' },
        call,
        { type: 'function_call_output', call_id: call.call_id, output: 'sunny' },
      ],
    });
    expect(second.output_text).toBe('Final answer from get_weather: sunny');
    const bodies = sent();
    expect(bodies).toHaveLength(2);
    expect(bodies[1]!.input).toEqual([
      { role: 'user', content: 'Weather in Zürich?' },
      { ...call },
      { type: 'function_call_output', call_id: call.call_id, output: 'sunny' },
    ]);
  });
});

describe('the OpenAI Agents SDK (Responses by default)', () => {
  it('an agent with a function tool runs to its final answer in two upstream calls', async () => {
    setTracingDisabled(true);
    setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 }));
    setOpenAIAPI('responses');
    const getWeather = tool({
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: ({ city }) => `sunny in ${city}`,
    });
    const agent = new Agent({
      name: 'weather',
      instructions: 'Answer with the tool.',
      model: MODEL,
      tools: [getWeather],
    });
    const result = await run(agent, 'Weather in Zürich?');
    expect(result.finalOutput).toBe('Final answer from get_weather: sunny in Zürich');
    expect(sent()).toHaveLength(2);
  });
});

describe('the AI SDK’s OpenAI provider (calls /responses)', () => {
  const tools = {
    get_weather: aiTool({
      description: 'The weather in a city',
      inputSchema: jsonSchema<{ city: string }>({
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
        additionalProperties: false,
      }),
      execute: async ({ city }) => `sunny in ${city}`,
    }),
  };
  const model = () => createOpenAI({ baseURL: base, apiKey: key })(MODEL);

  it('generateText with a tool: a two-step loop', async () => {
    const r = await generateText({
      model: model(),
      prompt: 'Weather in Zürich?',
      tools,
      stopWhen: stepCountIs(2),
      providerOptions: { openai: { store: false } },
    });
    expect(r.text).toBe('Final answer from get_weather: sunny in Zürich');
    expect(r.steps).toHaveLength(2);
    expect(sent()).toHaveLength(2);
  });

  it('streamText with a tool: a two-step loop', async () => {
    const r = streamText({
      model: model(),
      prompt: 'Weather in Zürich?',
      tools,
      stopWhen: stepCountIs(2),
      providerOptions: { openai: { store: false } },
    });
    let text = '';
    for await (const t of r.textStream) text += t;
    expect(text).toBe('Final answer from get_weather: sunny in Zürich');
    expect(sent()).toHaveLength(2);
  });
});
