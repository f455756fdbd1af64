/**
 * The clients that speak the Responses API, unchanged, as one table run against both ways the
 * proxy serves the route (test/inproc/responses-sdks.test.ts, responses-sdks-translated.test.ts):
 * the openai SDK (plain, streamed, a function tool, a second turn carrying the call and its
 * output), the OpenAI Agents SDK (an agent runs a tool to its final answer in two upstream calls,
 * set up as the README shows) and the AI SDK's `createOpenAI(...)(model)`, which calls
 * /responses (generateText and streamText, a two-step tool loop).
 */
import { createOpenAI } from '@ai-sdk/openai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import { generateText, jsonSchema, stepCountIs, streamText, tool as aiTool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SAMPLE_STRING } from '../../simulator/sim-agent.js';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from './inproc.js';

type Json = Record<string, unknown>;

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
/** The function tool as the translation sends it to chat completions. */
const chatWeather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: weather.parameters,
    strict: true,
  },
};
const ARGS = JSON.stringify({ city: SAMPLE_STRING });

/**
 * The table of clients, against a daemon in process listening on 127.0.0.1:0, in front of a
 * simulator that serves /v1/responses itself (`responses`: passed through) or does not (the
 * proxy translates to its chat completions, having learned so from the first request, which
 * beforeAll sends). A client's expectations are the same both ways; what the simulator received
 * is asserted in its own terms. One mode per test file: the Agents SDK keeps its default client
 * for the life of the module.
 */
export function describeClients(responses: boolean): void {
  let d: Inproc;
  let m: { sim: Simulator; simUrl: string; key: string; responses: boolean };
  let base: string;
  let client: OpenAI;
  /** What the simulator received: Responses bodies when it serves the route, chat bodies when the proxy translates. */
  const received = (): Json[] =>
    m.sim.requests
      .filter((r) => r.path === (m.responses ? '/v1/responses' : '/v1/chat/completions'))
      .map((r) => r.body as Json);
  /** Every request went the mode's way: none reached /v1/responses of a server without it. */
  const only = (): void => {
    // The ready check's GET /v1/models aside: the requests the clients made.
    const paths = new Set(m.sim.requests.filter((r) => r.method === 'POST').map((r) => r.path));
    expect([...paths]).toEqual([m.responses ? '/v1/responses' : '/v1/chat/completions']);
  };

  beforeAll(async () => {
    d = await buildInproc();
    await d.daemon.listen();
    const { sim, url } = await startSim({ chunks: 3, responses });
    expect((await d.manage('POST', '/v1/instances', { id: 'gpu', model: MODEL, endpoint: url })).status).toBe(201);
    const ready = await d.manage('POST', '/v1/instances/gpu/ready', { probe: false });
    const key = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
    m = { sim, simUrl: url, key, responses };
    base = `${d.daemon.ctx.baseUrl}/v1`;
    client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 });
    if (responses) return;
    // The first request finds the server without the route: it is sent again, translated.
    const first = await client.responses.create({ model: MODEL, input: 'Say hello' });
    expect(first.output_text).toBe('t0 t1 t2 ');
    expect(sim.requests.filter((r) => r.method === 'POST').map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /v1/responses',
      'POST /v1/chat/completions',
    ]);
  });

  afterAll(async () => {
    await d?.close();
    await m?.sim.close();
  });

  beforeEach(async () => {
    await fetch(`${m.simUrl}/_sim/requests`, { method: 'DELETE' });
  });

  describe('the openai SDK', () => {
    it('responses.create, plain', async () => {
      const r = await client.responses.create({ model: MODEL, input: 'Say hello' });
      expect(r.id).toMatch(/^resp_[0-9A-Za-z]{24}$/);
      expect(r.output_text).toBe('t0 t1 t2 ');
      expect(r.output).toEqual([
        {
          id: expect.stringMatching(/^msg_/),
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 't0 t1 t2 ', annotations: [], logprobs: [] }],
        },
      ]);
      expect(r).toMatchObject({ object: 'response', status: 'completed', model: MODEL, error: null });
      expect(r.usage).toEqual({
        input_tokens: 2,
        output_tokens: 3,
        total_tokens: 5,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 },
      });
      expect(received()).toEqual([
        m.responses
          ? { model: MODEL, input: 'Say hello' }
          : { model: MODEL, messages: [{ role: 'user', content: 'Say hello' }] },
      ]);
      only();
    });

    it('responses.create, streamed: the events the SDK yields, ending with response.completed', async () => {
      const stream = await client.responses.create({ model: MODEL, input: 'Say hello', stream: true });
      const types: string[] = [];
      const seqs: number[] = [];
      let text = '';
      let done: OpenAI.Responses.Response | null = null;
      for await (const ev of stream) {
        types.push(ev.type);
        seqs.push(ev.sequence_number);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.completed') done = ev.response;
      }
      expect(types).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      expect(seqs).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(text).toBe('t0 t1 t2 ');
      expect(done?.id).toMatch(/^resp_[0-9A-Za-z]{24}$/);
      expect(done?.output).toEqual([
        {
          id: expect.stringMatching(/^msg_/),
          type: 'message',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: 't0 t1 t2 ', annotations: [], logprobs: [] }],
        },
      ]);
      expect(done?.usage).toMatchObject({ input_tokens: 2, output_tokens: 3, total_tokens: 5 });
      expect(received()).toEqual([
        m.responses
          ? { model: MODEL, input: 'Say hello', stream: true }
          : {
              model: MODEL,
              messages: [{ role: 'user', content: 'Say hello' }],
              stream: true,
              stream_options: { include_usage: true },
            },
      ]);
      only();
    });

    it('a function tool, then a second turn carrying the function_call and its function_call_output', async () => {
      const first = await client.responses.create({ model: MODEL, input: 'Weather in Zürich?', tools: [weather] });
      const call = first.output.find((o) => o.type === 'function_call');
      expect(call).toEqual({
        id: expect.stringMatching(/^fc_/),
        type: 'function_call',
        status: 'completed',
        call_id: expect.any(String),
        name: 'get_weather',
        arguments: ARGS,
      });
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
      expect(second.output_text).toBe('Final answer from the tool: sunny');
      const bodies = received();
      expect(bodies).toHaveLength(2);
      if (m.responses)
        expect(bodies[1]!.input).toEqual([
          { role: 'user', content: 'Weather in Zürich?' },
          { ...call },
          { type: 'function_call_output', call_id: call.call_id, output: 'sunny' },
        ]);
      else
        expect(bodies[1]).toEqual({
          model: MODEL,
          tools: [chatWeather],
          messages: [
            { role: 'user', content: 'Weather in Zürich?' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: call.call_id, type: 'function', function: { name: 'get_weather', arguments: ARGS } }],
            },
            { role: 'tool', tool_call_id: call.call_id, content: 'sunny' },
          ],
        });
      only();
    });
  });

  describe('the OpenAI Agents SDK (Responses by default)', () => {
    it('an agent with a function tool runs to its final answer in two upstream calls', async () => {
      setTracingDisabled(true);
      // A provider of its own, not the SDK's default client: that one is module-wide, and a
      // file sharing this worker may have pointed it at a server since closed.
      const runner = new Runner({
        modelProvider: new OpenAIProvider({
          openAIClient: new OpenAI({ baseURL: base, apiKey: m.key, maxRetries: 0 }),
          useResponses: true,
        }),
      });
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
      const result = await runner.run(agent, 'Weather in Zürich?');
      expect(result.finalOutput).toBe(`Final answer from the tool: sunny in ${SAMPLE_STRING}`);
      const bodies = received();
      expect(bodies).toHaveLength(2);
      // The second call carries the first one's tool call and the tool's output.
      const last = m.responses ? (bodies[1]!.input as Json[]).at(-1) : (bodies[1]!.messages as Json[]).at(-1);
      expect(last).toMatchObject(
        m.responses
          ? { type: 'function_call_output', output: expect.stringContaining(`sunny in ${SAMPLE_STRING}`) }
          : { role: 'tool', content: expect.stringContaining(`sunny in ${SAMPLE_STRING}`) },
      );
      only();
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
    const model = () => createOpenAI({ baseURL: base, apiKey: m.key })(MODEL);
    const answer = `Final answer from the tool: sunny in ${SAMPLE_STRING}`;

    it('generateText with a tool: a two-step loop', async () => {
      const r = await generateText({
        model: model(),
        prompt: 'Weather in Zürich?',
        tools,
        stopWhen: stepCountIs(2),
        providerOptions: { openai: { store: false } },
      });
      expect(r.steps).toHaveLength(2);
      expect(r.text).toBe(answer);
      expect(received()).toHaveLength(2);
      only();
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
      expect(text).toBe(answer);
      expect(received()).toHaveLength(2);
      only();
    });
  });
}
