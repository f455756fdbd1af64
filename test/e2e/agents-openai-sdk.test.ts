/**
 * The openai SDK's agents through ob-proxy, unchanged: tool loops plain and streaming, runTools,
 * vLLM's tool call deltas and an older Ollama's stream, against a real `ob-proxy serve` and
 * `ob-proxy simulate` (Ollama ≥ 0.32.6, vLLM's wire, Ollama before it).
 */
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAMPLE_STRING } from '../../simulator/sim-agent.js';
import { type AgentGateway, GEMMA, QWEN, lastChat, startAgentGateway } from '../helpers/agent-gateway.js';
import { ARGS, TOOLS, WEATHER } from '../helpers/weather-tool.js';

let gateway: AgentGateway;
let sims: AgentGateway['sims'];
let sdk: AgentGateway['sdk'];

beforeAll(async () => {
  gateway = await startAgentGateway(['ollama', 'vllm', 'old']);
  ({ sims, sdk } = gateway);
}, 60_000);
afterAll(async () => {
  await gateway?.stop();
});

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
