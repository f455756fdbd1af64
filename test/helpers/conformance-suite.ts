/**
 * The gateway's promises against a real model server (test/conformance/): one suite, run by one
 * file per server with that server's profile. Every answer through the gateway is compared with
 * the same request sent straight to the server (seeded sampling is deterministic on both), so
 * what is asserted is the server's own answer, whole, not what a test expects a model to say.
 */
import Anthropic from '@anthropic-ai/sdk';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, streamText } from 'ai';
import OpenAI, { APIError } from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './processes.js';
import { type Gateway, startGateway } from './real-gateway.js';
import { REALUP_SKIP, type RealServer } from './realup.js';
import { type Exchange, ROUTES, type RouteSpec, answerIds, eventIds, exchange, normalised } from './wire-exchange.js';

type Body = Record<string, unknown>;

export const GEMMA = 'gemma4:26b';
export const QWEN = 'qwen3.6:27b';

/** A tool without arguments: a grammar-free model closes its call quickly. */
export const GET_TIME = {
  type: 'function',
  function: { name: 'get_time', description: 'The time now', parameters: { type: 'object', properties: {} } },
} as const;

export const GET_WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
} as const;

export const JSON_SCHEMA_FORMAT = {
  type: 'json_schema',
  json_schema: {
    name: 'answer',
    schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false },
  },
} as const;

/**
 * A reply that runs to `max_tokens`: the grammar of a lowercase string never lets the model end
 * it, and has no `"` to close it (the tiny models stop on their own after a few dozen tokens).
 */
export const ENDLESS_FORMAT = {
  type: 'json_schema',
  json_schema: { name: 'letters', schema: { type: 'string', pattern: '^[a-z]*$' } },
} as const;

const hello = (model: string, extra: Body = {}): Body => ({
  model,
  messages: [{ role: 'user', content: 'Hello' }],
  ...extra,
});

/** The requests of a server's profile, each chosen (seed) for what its model does with it. */
export interface Profile {
  readonly name: string;
  /** The servers for GEMMA (Qwen2.5 chat template) and QWEN (Gemma 4 chat template); may be one. */
  start(): Promise<{ gemma: RealServer; qwen: RealServer }>;
  /** GEMMA, sampled with a seed: a few words of text. */
  readonly text: Body;
  /** GEMMA, `tools` with `tool_choice: "required"`: at least one call, finish `tool_calls`. */
  readonly tools: Body;
  /** QWEN: an answer with reasoning (the field the server names it). */
  readonly reasoning: Body & { field: 'reasoning' | 'reasoning_content' };
  /** A request whose stream the server ends in its own failure mode. */
  readonly failure: Body;
  /** How the server ends `failure`'s stream. */
  readonly failureEnd: 'stops' | 'error-event';
  /**
   * `max_tokens` for a reply that runs long (within one slot's context): seconds of generation, so
   * that a cancellation reaches the server while it still generates, however loaded the machine.
   */
  readonly longTokens: number;
  /** The other client APIs the server serves itself. */
  readonly routes: readonly OtherRoute[];
}

export type OtherRoute = 'responses' | 'completions' | 'messages';

/** Each request the differential test sends straight and through the gateway, plain and streamed. */
export interface DiffCase {
  readonly name: string;
  readonly route: RouteSpec;
  readonly body: Body;
}

export function diffCases(p: Profile): DiffCase[] {
  const toolTurn: Body = {
    ...p.tools,
    tool_choice: 'auto',
    temperature: 0,
    max_tokens: 20,
    messages: [
      { role: 'user', content: 'What time is it?' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
    ],
  };
  const { field: _field, ...reasoning } = p.reasoning;
  return [
    { name: 'greedy text', route: ROUTES.chat, body: hello(GEMMA, { temperature: 0, seed: 1, max_tokens: 12 }) },
    { name: 'seeded text', route: ROUTES.chat, body: p.text },
    { name: 'tool call (tool_choice required)', route: ROUTES.chat, body: p.tools },
    { name: 'tool-result turn', route: ROUTES.chat, body: toolTurn },
    {
      name: 'json_schema',
      route: ROUTES.chat,
      body: hello(GEMMA, { temperature: 0, seed: 1, max_tokens: 40, response_format: JSON_SCHEMA_FORMAT }),
    },
    { name: 'reasoning (Gemma 4 template)', route: ROUTES.chat, body: reasoning },
  ];
}

/** The other client APIs, for the routes the server serves: greedy text, plain and streamed. */
export function otherRouteCases(p: Profile): DiffCase[] {
  const all: Record<OtherRoute, DiffCase> = {
    responses: {
      name: 'Responses API',
      route: ROUTES.responses,
      body: { model: GEMMA, input: 'Hello', temperature: 0, max_output_tokens: 12 },
    },
    completions: {
      name: 'legacy completions',
      route: ROUTES.completions,
      body: { model: GEMMA, prompt: 'Hello', temperature: 0, seed: 1, max_tokens: 12 },
    },
    messages: {
      name: 'Messages',
      route: ROUTES.messages,
      body: { model: GEMMA, max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'Hello' }] },
    },
  };
  return p.routes.map((r) => all[r]);
}

const MODES = [
  { mode: 'plain', extra: {} },
  { mode: 'streamed', extra: { stream: true } },
  { mode: 'streamed with usage', extra: { stream: true, stream_options: { include_usage: true } } },
] as const;

const OUR_ID = /^chatcmpl-[A-Za-z0-9]{24}$/;

/** The server's log past `from`: a generation cancelled there (`cancel task`), and the tokens it had when its slot was freed. */
async function cancelledAfter(server: RealServer, from: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const log = (await server.log()).slice(from);
    const task = /cancel task, id_task = (\d+)/.exec(log)?.[1];
    const freed =
      task === undefined ? undefined : new RegExp(`task ${task} \\| stop processing: n_tokens = (\\d+)`).exec(log)?.[1];
    if (freed !== undefined) return Number(freed);
    if (Date.now() > deadline)
      throw new Error(`${server.name} did not cancel the generation; its log since:\n${log.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Reads a stream until its first content event, then returns the rest as a promise. */
async function firstEventThenRest(res: Response): Promise<{ first: string; rest: Promise<string> }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    let more = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return more;
      more += decoder.decode(value, { stream: true });
    }
  })();
  // A test that fails before reading the rest leaves no rejection unhandled.
  rest.catch(() => undefined);
  return { first: text, rest };
}

export function conformanceSuite(p: Profile): void {
  const title = REALUP_SKIP === null ? `${p.name} through ob-proxy` : `${p.name}: skipped, ${REALUP_SKIP}`;
  describe.skipIf(REALUP_SKIP !== null)(title, () => {
    let gemma: RealServer;
    let qwen: RealServer;
    let gw: Gateway;
    /** The default key of each instance: GEMMA's at `gemma`, QWEN's at `qwen`. */
    const keys: Record<string, string> = {};
    const serverOf = (body: Body): RealServer => (body.model === QWEN ? qwen : gemma);
    const keyOf = (body: Body): string => keys[body.model as string]!;
    const straightClient = (s: RealServer): OpenAI =>
      new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const gatewayClient = (key: string): OpenAI =>
      new OpenAI({ baseURL: `${gw.baseUrl}/v1`, apiKey: key, maxRetries: 0 });

    beforeAll(async () => {
      ({ gemma, qwen } = await p.start());
      gw = await startGateway();
      keys[GEMMA] = await gw.addReady('gemma', GEMMA, gemma.url);
      keys[QWEN] = await gw.addReady('qwen', QWEN, qwen.url);
    }, 120_000);

    afterAll(async () => {
      await gw?.close();
      await gemma?.stop();
      if (qwen !== gemma) await qwen?.stop();
    });

    describe('differential: the same request straight and through the gateway, the same answer apart from ids', () => {
      const cases = diffCases(p).flatMap((c) => MODES.map((m) => ({ ...c, ...m })));
      it.each(cases)('$name, $mode', async ({ route, body, extra }) => {
        const request = { ...body, ...extra };
        const straight = await exchange(serverOf(body).url, route.path, request);
        const via = await exchange(gw.baseUrl, route.path, request, keyOf(body));
        expect(straight.status, straight.text).toBe(200);
        expect(normalised(route, via)).toEqual(normalised(route, straight));
        if (via.events.length > 0) {
          expect(via.events.at(-1)).toBe('[DONE]');
          const ids = eventIds(via);
          expect(new Set(ids).size).toBe(1);
          expect(ids[0]).toMatch(OUR_ID);
        } else expect((via.json as { id: string }).id).toMatch(OUR_ID);
      });

      // Legacy completions streamed ask for usage: llama-server sends it on its last chunk unasked,
      // and the gateway gives a client usage only when asked (docs/compatibility.md).
      const others = otherRouteCases(p).flatMap((c) =>
        [
          { mode: 'plain', extra: {} },
          {
            mode: 'streamed',
            extra:
              c.route === ROUTES.completions
                ? { stream: true, stream_options: { include_usage: true } }
                : { stream: true },
          },
        ].map((m) => ({ ...c, ...m })),
      );
      it.each(others)('$name, $mode', async ({ route, body, extra }) => {
        const request = { ...body, ...extra };
        const straight = await exchange(serverOf(body).url, route.path, request);
        const via = await exchange(gw.baseUrl, route.path, request, keyOf(body));
        expect(straight.status, straight.text).toBe(200);
        expect(normalised(route, via)).toEqual(normalised(route, straight));
        const ids = answerIds(route, via);
        expect(ids.length).toBeGreaterThan(0);
        expect(new Set(ids).size).toBe(1);
        expect(ids[0]).toMatch(route.ourId);
        if (via.events.length > 0) expect(via.events.at(-1) === '[DONE]').toBe(route.done);
      });

      it('each case does what it is there for on this server', async () => {
        // One at a time: requests decoded in one batch may not sample as they do alone.
        const answers: Exchange[] = [];
        for (const c of diffCases(p)) answers.push(await exchange(serverOf(c.body).url, c.route.path, c.body));
        const [greedy, text, tools, turn, json, reasoning] = answers;
        const choice = (x: Exchange | undefined): Record<string, unknown> =>
          (x!.json as { choices: Record<string, unknown>[] }).choices[0]!;
        const message = (x: Exchange | undefined): Record<string, unknown> =>
          choice(x).message as Record<string, unknown>;
        expect(typeof message(greedy).content).toBe('string');
        expect(message(text).content).toMatch(/\S/);
        expect(choice(tools).finish_reason).toBe('tool_calls');
        expect(message(tools).tool_calls).toEqual(
          expect.arrayContaining([expect.objectContaining({ function: { name: 'get_time', arguments: '{}' } })]),
        );
        expect(choice(turn).finish_reason).toMatch(/^(stop|length)$/);
        expect(JSON.parse(message(json).content as string)).toEqual({ ok: expect.any(Boolean) });
        expect(message(reasoning)[p.reasoning.field]).toMatch(/\S/);
      });
    });

    it('the openai SDK, plain and streamed: the server answer, our id', async () => {
      const direct = straightClient(gemma);
      const client = gatewayClient(keys[GEMMA]!);
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
          await straightClient(gemma).responses.create(body),
          await gatewayClient(keys[GEMMA]!).responses.create(body),
        ];
        expect(got.id).toMatch(ROUTES.responses.ourId);
        expect(ROUTES.responses.normalise(got)).toEqual(ROUTES.responses.normalise(want));
        const events = async (c: OpenAI): Promise<unknown[]> => {
          const out: unknown[] = [];
          for await (const e of await c.responses.create({ ...body, stream: true })) out.push(e);
          return out;
        };
        const [wantEvents, gotEvents] = [
          await events(straightClient(gemma)),
          await events(gatewayClient(keys[GEMMA]!)),
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
        expect(await outcome(gatewayClient(keys[GEMMA]!))).toEqual(await outcome(straightClient(gemma)));
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
        const direct = new Anthropic({ baseURL: gemma.url, apiKey: 'unused', maxRetries: 0 });
        const via = new Anthropic({ baseURL: gw.baseUrl, apiKey: keys[GEMMA]!, maxRetries: 0 });
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
      const [want, got] = [await run(straightClient(gemma)), await run(gatewayClient(keys[GEMMA]!))];
      expect(got).toEqual(want);
      expect(got[0]).toMatchObject({ choices: [{ finish_reason: 'tool_calls' }] });
    });

    it('the openai SDK: response_format json_schema gives JSON of the schema', async () => {
      const body = hello(GEMMA, { temperature: 0, seed: 1, max_tokens: 40, response_format: JSON_SCHEMA_FORMAT });
      const params = body as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
      const got = await gatewayClient(keys[GEMMA]!).chat.completions.create(params);
      expect(JSON.parse(got.choices[0]!.message.content!)).toEqual({ ok: expect.any(Boolean) });
      expect(ROUTES.chat.normalise(got)).toEqual(
        ROUTES.chat.normalise(await straightClient(gemma).chat.completions.create(params)),
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
      const want = await run(`${gemma.url}/v1`, 'unused');
      const got = await run(`${gw.baseUrl}/v1`, keys[GEMMA]!);
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
      const want = await run(`${gemma.url}/v1`, 'unused');
      const got = await run(`${gw.baseUrl}/v1`, keys[GEMMA]!);
      expect(got).toEqual(want);
      expect(got).toMatchObject({ content: expect.stringMatching(/\S/) });
    });

    const long = (): Body =>
      hello(GEMMA, {
        temperature: 1,
        seed: 1,
        max_tokens: p.longTokens,
        response_format: ENDLESS_FORMAT,
        stream: true,
      });

    it('a key revoked mid-stream: one error event, no [DONE], and the server cancels the generation', async () => {
      const key = await gw.createKey('gemma', 'revoked-mid-stream');
      const from = (await gemma.log()).length;
      const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key.secret}` },
        body: JSON.stringify(long()),
      });
      expect(res.status).toBe(200);
      const { first, rest } = await firstEventThenRest(res);
      expect(first).toMatch(/^data: \{.*"id":"chatcmpl-[A-Za-z0-9]{24}"/);
      expect(gw.inflight(key.id)).toBe(1);
      await gw.revoke(key.id);
      const events = (first + (await rest)).split('\n\n').filter((e) => e !== '');
      expect(events.at(-1)).toBe(
        `data: ${JSON.stringify({
          error: {
            message:
              'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Generate a new key for a ready instance.',
            type: 'authentication_error',
            code: 'revoked_api_key',
            param: null,
          },
        })}`,
      );
      expect(events.filter((e) => e.includes('"error"'))).toHaveLength(1);
      expect(events).not.toContain('data: [DONE]');
      // The generation was cut well before its max_tokens.
      expect(await cancelledAfter(gemma, from)).toBeLessThan(p.longTokens);
      expect(gw.inflight(key.id)).toBe(0);
    });

    it('a client that leaves: the server cancels the generation, nothing stays in flight', async () => {
      const key = await gw.createKey('gemma', 'leaves');
      const from = (await gemma.log()).length;
      const abort = new AbortController();
      const res = await fetch(`${gw.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key.secret}` },
        body: JSON.stringify(long()),
        signal: abort.signal,
      });
      const { first, rest } = await firstEventThenRest(res);
      expect(first).toMatch(/^data: \{.*"id":"chatcmpl-[A-Za-z0-9]{24}"/);
      abort.abort();
      await rest.catch(() => '');
      expect(await cancelledAfter(gemma, from)).toBeLessThan(p.longTokens);
      await eventually(() => gw.inflight(key.id) === 0, 'nothing in flight');
      expect(await gw.usage(key.id)).toMatchObject({ requests: 1, disconnects: 1 });
    });

    it(`the server's own failure mode (${p.failureEnd === 'stops' ? 'a stream that just stops' : 'an error event'}) reaches the client as one error event, and the SDK raises`, async () => {
      const server = serverOf(p.failure);
      const request = { ...p.failure, stream: true };
      const straight = await exchange(server.url, ROUTES.chat.path, request);
      const via = await exchange(gw.baseUrl, ROUTES.chat.path, request, keyOf(p.failure));
      expect(straight.events).not.toContain('[DONE]');
      const norm = (x: Exchange): unknown[] => x.events.map((e) => ROUTES.chat.normalise(e));
      const errors = via.events.filter((e) => typeof e === 'object' && e !== null && 'error' in e);
      expect(errors).toHaveLength(1);
      expect(via.events).not.toContain('[DONE]');
      if (p.failureEnd === 'stops') {
        // The server's events, then ours: the SDKs would otherwise return a half answer as whole.
        expect(norm(via).slice(0, -1)).toEqual(norm(straight));
        expect(via.events.at(-1)).toEqual({
          error: {
            message: 'The model server ended the stream before it was complete.',
            type: 'api_error',
            code: 'upstream_unavailable',
            param: null,
          },
        });
      } else {
        // The server's events, then its error event in our shape: its message, its code if a string.
        expect(norm(via).slice(0, -1)).toEqual(norm(straight).slice(0, -1));
        const theirs = (straight.events.at(-1) as { error: { message: string; code: unknown } }).error;
        expect(via.events.at(-1)).toEqual({
          error: {
            message: `Model server error: ${theirs.message}`,
            type: 'api_error',
            code: typeof theirs.code === 'string' ? theirs.code : 'upstream_error',
            param: null,
          },
        });
      }
      const stream = await gatewayClient(keyOf(p.failure)).chat.completions.create(
        request as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming,
      );
      const raised = await (async () => {
        try {
          for await (const _ of stream);
        } catch (err) {
          return err;
        }
        return null;
      })();
      expect(raised).toBeInstanceOf(APIError);

      // Not streamed: the server's error status and message, in our shape.
      const plain = { ...p.failure, stream: false };
      const straightPlain = await exchange(server.url, ROUTES.chat.path, plain);
      const viaPlain = await exchange(gw.baseUrl, ROUTES.chat.path, plain, keyOf(p.failure));
      expect(straightPlain.status).toBe(500);
      expect(viaPlain.status).toBe(500);
      const serverMessage = (straightPlain.json as { error: { message: string } }).error.message;
      expect(viaPlain.json).toEqual({
        error: {
          message: expect.stringContaining(serverMessage.slice(0, 40)),
          type: expect.any(String),
          code: expect.any(String),
          param: null,
        },
      });
    });

    it("usage is counted from the server's usage chunk: ob-proxy usage shows the server's token counts", async () => {
      const key = await gw.createKey('gemma', 'usage');
      const straight = await exchange(gemma.url, ROUTES.chat.path, {
        ...p.text,
        stream: true,
        stream_options: { include_usage: true },
      });
      const usage = (straight.events.at(-2) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
      // A plain answer, and a stream whose client did not ask for usage (the gateway asks for it).
      expect((await exchange(gw.baseUrl, ROUTES.chat.path, p.text, key.secret)).status).toBe(200);
      const streamed = await exchange(gw.baseUrl, ROUTES.chat.path, { ...p.text, stream: true }, key.secret);
      expect(streamed.events.some((e) => typeof e === 'object' && e !== null && 'usage' in e)).toBe(false);
      // The exchange is counted when the relay has ended it, which may come just after the
      // client read the stream's last byte.
      await eventually(
        async () => (await gw.usage(key.id)).completionTokens >= 2 * usage.completion_tokens,
        'both exchanges counted',
      ).catch(() => undefined);
      expect(await gw.usage(key.id)).toMatchObject({
        requests: 2,
        promptTokens: 2 * usage.prompt_tokens,
        completionTokens: 2 * usage.completion_tokens,
        estimatedTokens: 0,
        errors: 0,
        disconnects: 0,
      });
    });
  });
}
