/**
 * The conformance suite's client libraries against a real model server: the openai SDK (chat,
 * tools, json_schema, Responses), the Agents SDK, the Anthropic SDK, the AI SDK and LangChain.
 * Each gives through the gateway what it gives straight from the server.
 */
import Anthropic from '@anthropic-ai/sdk';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { expect, it } from 'vitest';
import { GEMMA, JSON_SCHEMA_FORMAT, type Profile, hello } from './conformance-cases.js';
import type { Gateway } from './real-gateway.js';
import type { RealServer } from './realup.js';
import { ROUTES } from './wire-exchange.js';

const OUR_ID = /^chatcmpl-[A-Za-z0-9]{24}$/;

/** What the suite has started, read when a test runs (its `beforeAll` starts them). */
export interface SuiteParts {
  gemma(): RealServer;
  gateway(): Gateway;
  /** The default key of the instance serving `model`. */
  key(model: string): string;
}

/** Declares the client-library tests inside the suite's `describe`. */
export function clientChecks(p: Profile, ctx: SuiteParts): void {
  const straightClient = (s: RealServer): OpenAI =>
    new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const gatewayClient = (key: string): OpenAI =>
    new OpenAI({ baseURL: `${ctx.gateway().baseUrl}/v1`, apiKey: key, maxRetries: 0 });

  it('the openai SDK, plain and streamed: the server answer, our id', async () => {
    const direct = straightClient(ctx.gemma());
    const client = gatewayClient(ctx.key(GEMMA));
    const body = { ...p.text, stream: false } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
    const [want, got] = [await direct.chat.completions.create(body), await client.chat.completions.create(body)];
    expect(got.id).toMatch(OUR_ID);
    expect(ROUTES.chat.normalise(got)).toEqual(ROUTES.chat.normalise(want));

    const streamed = { ...p.text, stream: true } as OpenAI.Chat.ChatCompletionCreateParamsStreaming;
    const chunks = async (c: OpenAI): Promise<ChatCompletionChunk[]> => {
      const out: ChatCompletionChunk[] = [];
      for await (const chunk of await c.chat.completions.create(streamed)) out.push(chunk);
      return out;
    };
    const [wantChunks, gotChunks] = [await chunks(direct), await chunks(client)];
    expect(gotChunks.length).toBeGreaterThan(2);
    expect(gotChunks.map((c) => ROUTES.chat.normalise(c))).toEqual(wantChunks.map((c) => ROUTES.chat.normalise(c)));
    expect(new Set(gotChunks.map((c) => c.id)).size).toBe(1);
    expect(gotChunks[0]!.id).toMatch(OUR_ID);
  });

  it.skipIf(!p.routes.includes('responses'))(
    'the openai SDK and the Agents SDK on the Responses API: the server answer, our id',
    async () => {
      const body = { model: GEMMA, input: 'Hello', temperature: 0, max_output_tokens: 12 };
      const [want, got] = [
        await straightClient(ctx.gemma()).responses.create(body),
        await gatewayClient(ctx.key(GEMMA)).responses.create(body),
      ];
      expect(got.id).toMatch(ROUTES.responses.ourId);
      expect(ROUTES.responses.normalise(got)).toEqual(ROUTES.responses.normalise(want));
      const events = async (c: OpenAI): Promise<unknown[]> => {
        const out: unknown[] = [];
        for await (const e of await c.responses.create({ ...body, stream: true })) out.push(e);
        return out;
      };
      const [wantEvents, gotEvents] = [
        await events(straightClient(ctx.gemma())),
        await events(gatewayClient(ctx.key(GEMMA))),
      ];
      expect(gotEvents.map((e) => ROUTES.responses.normalise(e))).toEqual(
        wantEvents.map((e) => ROUTES.responses.normalise(e)),
      );
      // An agent's run ends through the gateway as it ends straight: on Ollama, with the server's
      // own text; on llama-server, whose tiny model never gives the SDK a final output, at max turns.
      setTracingDisabled(true);
      setOpenAIAPI('responses');
      const agent = new Agent({ name: 'hello', model: GEMMA, modelSettings: { temperature: 0, maxTokens: 12 } });
      const outcome = async (c: OpenAI): Promise<unknown> => {
        setDefaultOpenAIClient(c);
        try {
          return { output: (await run(agent, 'Hello', { maxTurns: 3 })).finalOutput };
        } catch (err) {
          return { error: (err as Error).name };
        }
      };
      expect(await outcome(gatewayClient(ctx.key(GEMMA)))).toEqual(await outcome(straightClient(ctx.gemma())));
    },
  );

  it.skipIf(!p.routes.includes('messages'))(
    'the Anthropic SDK on Messages, plain and streamed: the server answer, our id',
    async () => {
      const body = {
        model: GEMMA,
        max_tokens: 12,
        temperature: 0,
        messages: [{ role: 'user' as const, content: 'Hello' }],
      } as Anthropic.MessageCreateParamsNonStreaming;
      const direct = new Anthropic({ baseURL: ctx.gemma().url, apiKey: 'unused', maxRetries: 0 });
      const via = new Anthropic({ baseURL: ctx.gateway().baseUrl, apiKey: ctx.key(GEMMA), maxRetries: 0 });
      const [want, got] = [await direct.messages.create(body), await via.messages.create(body)];
      expect(got.id).toMatch(ROUTES.messages.ourId);
      expect(ROUTES.messages.normalise(got)).toEqual(ROUTES.messages.normalise(want));
      const events = async (c: Anthropic): Promise<unknown[]> => {
        const out: unknown[] = [];
        for await (const e of await c.messages.create({ ...body, stream: true })) out.push(e);
        return out;
      };
      const [wantEvents, gotEvents] = [await events(direct), await events(via)];
      expect(gotEvents.map((e) => ROUTES.messages.normalise(e))).toEqual(
        wantEvents.map((e) => ROUTES.messages.normalise(e)),
      );
    },
  );

  it('the openai SDK: a forced tool call, then the tool-result turn', async () => {
    const run = async (c: OpenAI): Promise<unknown[]> => {
      const body = p.tools as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
      const first = await c.chat.completions.create(body);
      const msg = first.choices[0]!.message;
      const messages: ChatCompletionMessageParam[] = [
        ...body.messages,
        msg as ChatCompletionMessageParam,
        ...msg.tool_calls!.map((t) => ({ role: 'tool' as const, tool_call_id: t.id, content: '12:00' })),
      ];
      const second = await c.chat.completions.create({ ...body, messages, tool_choice: 'auto', temperature: 0 });
      return [first, second].map((r) => ROUTES.chat.normalise(r));
    };
    const [want, got] = [await run(straightClient(ctx.gemma())), await run(gatewayClient(ctx.key(GEMMA)))];
    expect(got).toEqual(want);
    expect(got[0]).toMatchObject({ choices: [{ finish_reason: 'tool_calls' }] });
  });

  it('the openai SDK: response_format json_schema gives JSON of the schema', async () => {
    const body = hello(GEMMA, { temperature: 0, seed: 1, max_tokens: 40, response_format: JSON_SCHEMA_FORMAT });
    const params = body as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
    const got = await gatewayClient(ctx.key(GEMMA)).chat.completions.create(params);
    expect(JSON.parse(got.choices[0]!.message.content!)).toEqual({ ok: expect.any(Boolean) });
    expect(ROUTES.chat.normalise(got)).toEqual(
      ROUTES.chat.normalise(await straightClient(ctx.gemma()).chat.completions.create(params)),
    );
  });

  it('the AI SDK (openai-compatible): generateText and streamText give the server answer and usage', async () => {
    const run = async (baseURL: string, apiKey: string): Promise<unknown> => {
      const model = createOpenAICompatible({ name: 'ob', baseURL, apiKey, includeUsage: true })(GEMMA);
      const o = { model, prompt: 'Hello', temperature: 1, seed: p.text.seed as number, maxOutputTokens: 12 };
      const g = await generateText({ ...o, maxRetries: 0 });
      const s = streamText({ ...o, maxRetries: 0 });
      let streamedText = '';
      for await (const part of s.textStream) streamedText += part;
      const u = (x: { inputTokens?: number; outputTokens?: number }): unknown => [x.inputTokens, x.outputTokens];
      return {
        text: g.text,
        finish: g.finishReason,
        usage: u(g.usage),
        streamedText,
        streamedFinish: await s.finishReason,
        streamedUsage: u(await s.usage),
      };
    };
    const want = await run(`${ctx.gemma().url}/v1`, 'unused');
    const got = await run(`${ctx.gateway().baseUrl}/v1`, ctx.key(GEMMA));
    expect(got).toEqual(want);
    expect(got).toMatchObject({ text: expect.stringMatching(/\S/), usage: [expect.any(Number), expect.any(Number)] });
  });

  it('LangChain ChatOpenAI: invoke and stream give the server answer', async () => {
    const run = async (baseURL: string, apiKey: string): Promise<unknown> => {
      const llm = new ChatOpenAI({ model: GEMMA, apiKey, configuration: { baseURL }, temperature: 1, maxTokens: 12 });
      const ai = await llm.invoke('Hello', { seed: p.text.seed as number });
      let streamed = '';
      for await (const chunk of await llm.stream('Hello', { seed: p.text.seed as number }))
        streamed += String(chunk.content);
      return {
        content: ai.content,
        finish: ai.response_metadata.finish_reason as unknown,
        usage: ai.usage_metadata,
        streamed,
      };
    };
    const want = await run(`${ctx.gemma().url}/v1`, 'unused');
    const got = await run(`${ctx.gateway().baseUrl}/v1`, ctx.key(GEMMA));
    expect(got).toEqual(want);
    expect(got).toMatchObject({ content: expect.stringMatching(/\S/) });
  });
}
