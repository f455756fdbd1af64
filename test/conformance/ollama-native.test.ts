/**
 * Ollama's own API against real Ollama (v0.33.0-rc2, the server instances run), straight and
 * through the gateway (docs/compatibility.md, "Ollama's own API"): the differential (the same
 * seeded request both ways gives the same status and the same answer, line for line, apart from
 * timestamps and timings), errors Ollama gives passed on with its status, ollama-js doing what it
 * does straight (chat and generate plain and streamed, list, ps, show, version), a revocation
 * mid-stream ending the stream with one error line while Ollama cancels the generation, a client
 * that leaves cancelling it too, usage from Ollama's counts, and the management routes refused
 * with the model server left as it was.
 */
import { Ollama } from 'ollama';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ENDLESS_FORMAT, GEMMA, QWEN } from '../helpers/conformance-cases.js';
import { type HeldRelay, startHeldRelay } from '../helpers/held-relay.js';
import { eventually } from '../helpers/processes.js';
import { type Gateway, startGateway } from '../helpers/real-gateway.js';
import { REALUP_SKIP, type RealServer, startOllama } from '../helpers/realup.js';

type Json = Record<string, unknown>;

/** One request read whole: its status, content type, and its JSON lines (one for a plain answer). */
interface Native {
  status: number;
  type: string;
  lines: Json[];
  text: string;
}

async function native(base: string, path: string, body: unknown, key?: string): Promise<Native> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const lines = text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Json);
  return { status: res.status, type: (res.headers.get('content-type') ?? '').split(';')[0]!, lines, text };
}

/** What Ollama makes up per request: when, and how long each part took. */
const MADE_UP = /^(created_at|modified_at|expires_at|.*_duration)$/;

function normalised(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalised);
  if (typeof v !== 'object' || v === null) return v;
  const out: Json = {};
  for (const [k, x] of Object.entries(v)) out[k] = MADE_UP.test(k) ? '<made up>' : normalised(x);
  return out;
}

/** Ollama's log past `from`: a generation cancelled there, and the tokens it had when its slot was freed. */
async function cancelledAfter(server: RealServer, from: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const log = (await server.log()).slice(from);
    const task = /cancel task, id_task = (\d+)/.exec(log)?.[1];
    const freed =
      task === undefined ? undefined : new RegExp(`task ${task} \\| stop processing: n_tokens = (\\d+)`).exec(log)?.[1];
    if (freed !== undefined) return Number(freed);
    if (Date.now() > deadline)
      throw new Error(`Ollama did not cancel the generation; its log since:\n${log.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const SAY = { temperature: 1, seed: 7, num_predict: 12 };
const LONG = { temperature: 1, seed: 1, num_predict: 4000 };
/** A grammar the model cannot end (a lowercase string with no closing quote): the reply runs to num_predict. */
const ENDLESS = ENDLESS_FORMAT.json_schema.schema;
const chatBody = (extra: Json = {}): Json => ({
  model: GEMMA,
  messages: [{ role: 'user', content: 'Hello there friend' }],
  options: SAY,
  ...extra,
});
const generateBody = (extra: Json = {}): Json => ({ model: GEMMA, prompt: 'Once upon a time', options: SAY, ...extra });

describe.skipIf(REALUP_SKIP !== null)(
  REALUP_SKIP === null ? "Ollama's own API through ob-proxy" : `Ollama's own API: skipped, ${REALUP_SKIP}`,
  () => {
    let ollama: RealServer;
    let gw: Gateway;
    let key: string;
    const client = (secret = key): Ollama =>
      new Ollama({ host: gw.baseUrl, headers: { Authorization: `Bearer ${secret}` } });

    beforeAll(async () => {
      ollama = await startOllama({ ctx: 8192 });
      gw = await startGateway();
      key = await gw.addReady('gemma', GEMMA, ollama.url);
    }, 120_000);

    afterAll(async () => {
      await gw?.close();
      await ollama?.stop();
    });

    describe('differential: the same request straight and through the gateway', () => {
      const cases = [
        { name: 'chat, plain', path: '/api/chat', body: chatBody({ stream: false }), lines: 'one' },
        { name: 'chat, streamed', path: '/api/chat', body: chatBody(), lines: 'many' },
        { name: 'generate, plain', path: '/api/generate', body: generateBody({ stream: false }), lines: 'one' },
        { name: 'generate, streamed', path: '/api/generate', body: generateBody({ stream: true }), lines: 'many' },
        { name: 'a model load (no messages)', path: '/api/chat', body: { model: GEMMA, messages: [] }, lines: 'one' },
        {
          name: 'embed, where the model does not embed',
          path: '/api/embed',
          body: { model: GEMMA, input: 'x' },
          lines: 'one',
        },
        {
          name: 'a body Ollama refuses (messages not a list)',
          path: '/api/chat',
          body: { model: GEMMA, messages: 'x', stream: false },
          lines: 'one',
        },
      ];
      it.each(cases)('$name: same status, same lines', async ({ path, body, lines }) => {
        const straight = await native(ollama.url, path, body);
        const via = await native(gw.baseUrl, path, body, key);
        expect(via.status).toBe(straight.status);
        if (straight.status === 200) {
          // Several lines where the case streams tokens: the comparison is line for line.
          expect(straight.lines.length > 1).toBe(lines === 'many');
          expect(normalised(via.lines)).toEqual(normalised(straight.lines));
          expect(via.lines.at(-1)!.done).toBe(true);
          return;
        }
        // Its refusal, in its shape: its message, and our code beside it.
        const theirs = straight.lines[0] as { error: string };
        expect(Object.keys(theirs)).toEqual(['error']);
        expect(via.lines).toEqual([
          { error: `Model server error (HTTP ${straight.status}): ${theirs.error}`, code: 'upstream_error' },
        ]);
      });

      it('what Ollama refuses first and the gateway refuses first: both 400 for a stream flag not boolean', async () => {
        const body = chatBody({ stream: 'yes' });
        const straight = await native(ollama.url, '/api/chat', body);
        const via = await native(gw.baseUrl, '/api/chat', body, key);
        expect([straight.status, via.status]).toEqual([400, 400]);
        expect(Object.keys(via.lines[0]!)).toEqual(['error', 'code']);
      });
    });

    describe('ollama-js, straight and through the gateway', () => {
      const straight = (): Ollama => new Ollama({ host: ollama.url });

      it('chat and generate, plain and streamed: the same answers', async () => {
        const messages = [{ role: 'user', content: 'Hello there friend' }];
        const a = await straight().chat({ model: GEMMA, messages, options: SAY });
        const b = await client().chat({ model: GEMMA, messages, options: SAY });
        expect(normalised(b)).toEqual(normalised(a));
        const parts = async (o: Ollama): Promise<unknown[]> => {
          const out: unknown[] = [];
          for await (const p of await o.generate({
            model: GEMMA,
            prompt: 'Once upon a time',
            options: SAY,
            stream: true,
          }))
            out.push(p);
          return out;
        };
        expect(normalised(await parts(client()))).toEqual(normalised(await parts(straight())));
      });

      it('list and ps show the key’s model alone; show and version as Ollama answers them', async () => {
        const all = (await straight().list()).models.map((m) => m.name).sort();
        expect(all).toEqual([GEMMA, QWEN]);
        const listed = await client().list();
        expect(normalised(listed.models)).toEqual(
          normalised((await straight().list()).models.filter((m) => m.name === GEMMA)),
        );
        expect((await client().ps()).models.map((m) => m.name)).toEqual([GEMMA]);
        expect(normalised(await client().show({ model: GEMMA }))).toEqual(
          normalised(await straight().show({ model: GEMMA })),
        );
        expect(await client().version()).toEqual(await straight().version());
      });

      it('another model, pull and delete refused; the model server keeps its models', async () => {
        const status = (p: Promise<unknown>) =>
          p.then(
            () => 0,
            (e: { status_code?: number }) => e.status_code,
          );
        expect(await status(client().chat({ model: QWEN, messages: [{ role: 'user', content: 'x' }] }))).toBe(400);
        expect(await status(client().show({ model: QWEN }))).toBe(404);
        expect(await status(client().pull({ model: 'tinyllama' }))).toBe(403);
        expect(await status(client().delete({ model: QWEN }))).toBe(403);
        expect((await straight().list()).models.map((m) => m.name).sort()).toEqual([GEMMA, QWEN]);
      });
    });

    // Both held after their first line, however fast the model generates: the revocation and the
    // client's leaving land mid-stream by construction (a fast model on a loaded machine once
    // finished first).
    const heldInstance = async (name: string): Promise<HeldRelay> => {
      const relay = await startHeldRelay(ollama.url);
      onTestFinished(() => relay.close());
      await gw.addReady(name, GEMMA, relay.url);
      return relay;
    };

    it('a key revoked mid-stream: one error line, ollama-js raises, and Ollama cancels the generation', async () => {
      const relay = await heldInstance('gemma-held-revoked');
      const k = await gw.createKey('gemma-held-revoked', 'revoked-mid-stream');
      const from = (await ollama.log()).length;
      const stream = await client(k.secret).chat({
        model: GEMMA,
        messages: [{ role: 'user', content: 'Write a long story.' }],
        options: LONG,
        format: ENDLESS,
        stream: true,
      });
      const seen: unknown[] = [];
      const raised = await (async () => {
        try {
          for await (const part of stream) {
            seen.push(part);
            if (seen.length === 1) await gw.revoke(k.id);
          }
        } catch (err) {
          return (err as Error).message;
        }
        return null;
      })();
      expect(raised).toBe(
        'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
      );
      expect(relay.held).toBe(1);
      await eventually(() => relay.abortedWhileHeld === 1, 'the gateway closes the held upstream request');
      expect(await cancelledAfter(ollama, from)).toBeLessThan(4000);
      expect(gw.inflight(k.id)).toBe(0);
    });

    it('a client that leaves: Ollama cancels the generation, nothing stays in flight', async () => {
      const relay = await heldInstance('gemma-held-leaves');
      const k = await gw.createKey('gemma-held-leaves', 'leaves');
      const from = (await ollama.log()).length;
      const ac = new AbortController();
      const res = await fetch(`${gw.baseUrl}/api/generate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${k.secret}` },
        body: JSON.stringify({ model: GEMMA, prompt: 'Write a long story.', options: LONG, format: ENDLESS }),
        signal: ac.signal,
      });
      await res.body!.getReader().read();
      ac.abort();
      expect(relay.held).toBe(1);
      await eventually(() => relay.abortedWhileHeld === 1, 'the gateway closes the held upstream request');
      expect(await cancelledAfter(ollama, from)).toBeLessThan(4000);
      await eventually(() => gw.inflight(k.id) === 0, 'nothing in flight');
      expect(await gw.usage(k.id)).toMatchObject({ requests: 1, disconnects: 1 });
    });

    it('usage is Ollama’s counts: prompt_eval_count and eval_count, plain and streamed', async () => {
      const k = await gw.createKey('gemma', 'usage');
      const straight = await native(ollama.url, '/api/chat', chatBody({ stream: false }));
      const { prompt_eval_count: prompt, eval_count: completion } = straight.lines[0] as Record<string, number>;
      expect((await native(gw.baseUrl, '/api/chat', chatBody({ stream: false }), k.secret)).status).toBe(200);
      expect((await native(gw.baseUrl, '/api/chat', chatBody(), k.secret)).status).toBe(200);
      // A request is counted when it is admitted and charged when its exchange ends, just after
      // its last line reached the client: wait for both charges, then compare whole.
      await eventually(
        async () => (await gw.usage(k.id)).completionTokens >= 2 * completion!,
        'both requests charged',
      ).catch(() => undefined);
      expect(await gw.usage(k.id)).toMatchObject({
        requests: 2,
        promptTokens: 2 * prompt!,
        completionTokens: 2 * completion!,
        estimatedTokens: 0,
        errors: 0,
        byRoute: { ollama_chat: { requests: 2, promptTokens: 2 * prompt!, completionTokens: 2 * completion! } },
      });
    });
  },
);
