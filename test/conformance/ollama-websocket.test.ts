/**
 * The Responses API's WebSocket mode through the gateway, in front of real Ollama, which has no
 * WebSocket: what the socket answers is what Ollama answers over HTTP (greedy, so the same text),
 * a continuation answers as the whole conversation sent at once does, a warm-up reaches no model,
 * an id the socket does not keep is not found, and a key revoked mid-stream closes the socket
 * with its error event while Ollama cancels the generation. Straight to Ollama, none of this
 * exists: its /v1/responses ignores previous_response_id and has no WebSocket.
 */
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GEMMA } from '../helpers/conformance-cases.js';
import { type Gateway, startGateway } from '../helpers/real-gateway.js';
import { REALUP_SKIP, type RealServer, startOllama } from '../helpers/realup.js';
import { type Event, SocketClient, responseIn } from '../helpers/socket-client.js';

type Body = Record<string, unknown>;
const user = (content: string): Body => ({ type: 'message', role: 'user', content });
/** A reply that runs to its token cap: a grammar that never lets the model end it. */
const ENDLESS = { format: { type: 'json_schema', name: 'letters', schema: { type: 'string', pattern: '^[a-z]*$' } } };

/**
 * The same answer every time, and not an empty one: greedy, the tiny model's first token is its
 * end (Ollama ignores a seed on /v1/responses), and the grammar of a string of letters has none.
 */
const GREEDY_LETTERS = { text: ENDLESS, temperature: 0, max_output_tokens: 12 };

/** Ollama's log past `from` shows a generation cancelled (`cancel task`), within 10 s. */
async function cancelled(server: RealServer, from: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!/cancel task/.test((await server.log()).slice(from))) {
    if (Date.now() > deadline) throw new Error(`${server.name} did not cancel the generation`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** POST /v1/responses streamed straight to `base`: its events' data, in order. */
async function straight(base: string, body: Body): Promise<Event[]> {
  const res = await fetch(`${base}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  expect(res.status).toBe(200);
  return (await res.text())
    .split('\n\n')
    .map((f) => f.split('\n').find((l) => l.startsWith('data: ')))
    .filter((l): l is string => l !== undefined)
    .map((l) => JSON.parse(l.slice(6)) as Event);
}

/** The text of a response's message items. */
function textOf(response: Body): string {
  return ((response.output ?? []) as { type: string; content?: { text?: string }[] }[])
    .filter((i) => i.type === 'message')
    .flatMap((i) => i.content ?? [])
    .map((c) => c.text ?? '')
    .join('');
}

const title = REALUP_SKIP === null ? 'real Ollama over a Responses WebSocket' : `skipped: ${REALUP_SKIP}`;

describe.skipIf(REALUP_SKIP !== null)(title, () => {
  let ollama: RealServer;
  let gw: Gateway;
  let key: string;

  beforeAll(async () => {
    ollama = await startOllama({ ctx: 8192 });
    gw = await startGateway();
    key = await gw.addReady('gemma', GEMMA, ollama.url);
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await ollama?.stop();
  });

  it("a turn: the events and the answer Ollama's own stream gives, with our response id", async () => {
    const body = { model: GEMMA, input: [user('Hello')], ...GREEDY_LETTERS };
    const direct = await straight(ollama.url, body);
    const c = await SocketClient.open(gw.baseUrl, key);
    const via = await c.create(body);
    expect(via.map((e) => e.type)).toEqual(direct.map((e) => e.type));
    const r = responseIn(via);
    expect(r.id).toMatch(/^resp_[A-Za-z0-9]{24}$/);
    expect(textOf(r)).toMatch(/^"[a-z]+$/);
    expect(textOf(r)).toBe(textOf(responseIn(direct)));
    expect(r.status).toBe('completed');
    c.close();
  });

  it('two turns by previous_response_id answer as the whole conversation sent at once', async () => {
    const c = await SocketClient.open(gw.baseUrl, key);
    const opts = GREEDY_LETTERS;
    const first = [user('My name is Alice.')];
    const r1 = responseIn(await c.create({ model: GEMMA, store: false, input: first, ...opts }));
    const next = user('What is my name?');
    const r2 = responseIn(
      await c.create({ model: GEMMA, store: false, previous_response_id: r1.id, input: [next], ...opts }),
    );
    expect(r2).toMatchObject({ status: 'completed', previous_response_id: r1.id });
    const whole = responseIn(
      await straight(ollama.url, { model: GEMMA, input: [...first, ...(r1.output as Body[]), next], ...opts }),
    );
    expect(textOf(r2)).toMatch(/^"[a-z]+$/);
    expect(textOf(r2)).toBe(textOf(whole));
    // Straight to Ollama, the id is ignored: it answers the new message alone.
    const ignored = responseIn(
      await straight(ollama.url, { model: GEMMA, previous_response_id: 'resp_any', input: [next], ...opts }),
    );
    expect(ignored.previous_response_id).toBeNull();
    c.close();
  });

  it('a warm-up reaches no model; an id the socket does not keep is not found', async () => {
    const from = (await ollama.log()).length;
    const c = await SocketClient.open(gw.baseUrl, key);
    const warm = responseIn(await c.create({ model: GEMMA, generate: false, input: [user('Be brief.')] }));
    expect(warm).toMatchObject({ status: 'completed', output: [] });
    const missing = await c.create({ model: GEMMA, previous_response_id: 'resp_not_here', input: 'Hi' });
    expect(missing).toEqual([
      expect.objectContaining({
        type: 'error',
        status: 400,
        error: expect.objectContaining({ code: 'previous_response_not_found' }),
      }),
    ]);
    expect((await ollama.log()).slice(from)).not.toMatch(/POST +"?\/v1\/responses/);
    c.close();
  });

  it("the openai SDK's ResponsesWS: a turn, then a continuation", async () => {
    const ws = new ResponsesWS(new OpenAI({ baseURL: `${gw.baseUrl}/v1`, apiKey: key, maxRetries: 0 }));
    const next = (): Promise<Body> =>
      new Promise((resolve, reject) => {
        ws.once('response.completed', (e) => resolve((e as unknown as { response: Body }).response));
        ws.once('error', reject);
      });
    let done = next();
    ws.send({ type: 'response.create', model: GEMMA, input: 'Hello', temperature: 0, max_output_tokens: 8 });
    const r1 = await done;
    done = next();
    ws.send({
      type: 'response.create',
      model: GEMMA,
      previous_response_id: r1.id as string,
      input: 'Again',
      max_output_tokens: 8,
    });
    expect(await done).toMatchObject({ status: 'completed', previous_response_id: r1.id });
    ws.close();
  });

  it('a key revoked mid-stream: its error event last, 1008, and Ollama cancels the generation', async () => {
    const revoked = await gw.createKey('gemma', 'revoked-on-a-socket');
    const from = (await ollama.log()).length;
    const c = await SocketClient.open(gw.baseUrl, revoked.secret);
    c.send({
      type: 'response.create',
      model: GEMMA,
      input: 'Write letters.',
      text: ENDLESS,
      temperature: 1,
      max_output_tokens: 8000,
    });
    await c.until((es) => es.filter((e) => e.type === 'response.output_text.delta').length >= 2);
    // The socket and its response, each in the key's in-flight list.
    expect(gw.inflight(revoked.id)).toBe(2);
    await gw.revoke(revoked.id);
    expect(await c.closed).toEqual({ code: 1008, reason: 'revoked_api_key' });
    expect(c.events.at(-1)).toMatchObject({ type: 'error', code: 'revoked_api_key' });
    expect(c.events.filter((e) => e.type === 'error')).toHaveLength(1);
    expect(c.events.some((e) => e.type === 'response.completed')).toBe(false);
    await cancelled(ollama, from);
    expect(gw.inflight(revoked.id)).toBe(0);
    expect(await gw.usage(revoked.id)).toMatchObject({ requests: 1 });
  });
});
