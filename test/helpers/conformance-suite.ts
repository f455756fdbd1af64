/**
 * The gateway's promises against a real model server (test/conformance/): one suite, run by one
 * file per server with that server's profile. Every answer through the gateway is compared with
 * the same request sent straight to the server (seeded sampling is deterministic on both), so
 * what is asserted is the server's own answer, whole, not what a test expects a model to say.
 * The requests are in conformance-cases.ts, the client libraries' tests in conformance-clients.ts.
 */
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  type Body,
  ENDLESS_FORMAT,
  GEMMA,
  type Profile,
  QWEN,
  diffCases,
  hello,
  otherRouteCases,
} from './conformance-cases.js';
import { clientChecks } from './conformance-clients.js';
import { startHeldRelay } from './held-relay.js';
import { eventually } from './processes.js';
import { type Gateway, startGateway } from './real-gateway.js';
import { REALUP_SKIP, type RealServer } from './realup.js';
import { type Exchange, ROUTES, answerIds, eventIds, exchange, normalised } from './wire-exchange.js';

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

    clientChecks(p, {
      gemma: () => gemma,
      gateway: () => gw,
      key: (model) => keys[model]!,
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
      // The stream is held after its first event, however fast the model generates: the revocation
      // lands mid-stream by construction (a fast model on a loaded machine once finished first).
      const relay = await startHeldRelay(gemma.url);
      onTestFinished(() => relay.close());
      await gw.addReady('gemma-held', GEMMA, relay.url);
      const key = await gw.createKey('gemma-held', 'revoked-mid-stream');
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
              'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
            type: 'authentication_error',
            code: 'revoked_api_key',
            param: null,
          },
        })}`,
      );
      expect(events.filter((e) => e.includes('"error"'))).toHaveLength(1);
      expect(events).not.toContain('data: [DONE]');
      expect(relay.held).toBe(1);
      // The gateway dropped the upstream request while it was held, and the server cancelled.
      await eventually(() => relay.abortedWhileHeld === 1, 'the gateway closes the held upstream request');
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
