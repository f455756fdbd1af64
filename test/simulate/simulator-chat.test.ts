/**
 * The simulator's POST /v1/chat/completions as Ollama answers it: one chat.completion, or a
 * stream with role on the first delta, a finish chunk, usage when asked and [DONE]; Ollama's
 * validation errors; and the per-request `[[sim …]]` directives that override its knobs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { buildSimulator, type Simulator, type SimulatorOptions } from '../../simulator/simulator.js';
import { chat, collect, data, MODEL, userMessage } from './helpers.js';

let sim: Simulator | null = null;

async function start(opts: Partial<SimulatorOptions> = {}): Promise<string> {
  sim = buildSimulator({ models: [MODEL], ...opts });
  return sim.listen(0);
}

afterEach(async () => {
  await sim?.close();
  sim = null;
});

const chunk = (id: string, created: number, delta: object, finish: string | null): object => ({
  id,
  object: 'chat.completion.chunk',
  created,
  model: MODEL,
  system_fingerprint: 'fp_ollama',
  choices: [{ index: 0, delta, finish_reason: finish }],
});

describe('POST /v1/chat/completions, non-streaming', () => {
  it('answers one Ollama-shaped chat.completion with numbered tokens and usage', async () => {
    const base = await start({ chunks: 4 });
    const res = await chat(base, {
      ...userMessage('say four words please'),
      temperature: 0.2,
      unknown_field: { x: 1 },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = (await res.json()) as { id: string; created: number };
    expect(body.id).toMatch(/^chatcmpl-\d{1,3}$/);
    expect(Number(body.id.slice(9))).toBeLessThanOrEqual(998);
    expect(Math.abs(body.created - Date.now() / 1000)).toBeLessThan(5);
    expect(body).toStrictEqual({
      id: body.id,
      object: 'chat.completion',
      created: body.created,
      model: MODEL,
      system_fingerprint: 'fp_ollama',
      choices: [{ index: 0, message: { role: 'assistant', content: 't0 t1 t2 t3 ' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 4, completion_tokens: 4, total_tokens: 8 },
    });
  });

  it('when max_tokens < chunks then it stops at exactly max_tokens with finish_reason length', async () => {
    const base = await start({ chunks: 10 });
    const body = (await (await chat(base, { ...userMessage('hi'), max_tokens: 3 })).json()) as Record<string, unknown>;
    expect(body.choices).toStrictEqual([
      { index: 0, message: { role: 'assistant', content: 't0 t1 t2 ' }, finish_reason: 'length' },
    ]);
    expect(body.usage).toStrictEqual({ prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 });
  });

  it('records the request headers and parsed body before answering', async () => {
    const base = await start();
    const payload = { ...userMessage('hello there'), stream: false };
    await (await chat(base, payload, { headers: { 'content-type': 'application/json', 'x-trace': 'abc' } })).text();
    const r = await sim!.waitFor((x) => x.completed);
    expect(r).toMatchObject({
      seq: 1,
      method: 'POST',
      path: '/v1/chat/completions',
      body: payload,
      aborted: false,
      completed: true,
    });
    expect(r.headers['x-trace']).toBe('abc');
    expect(r.endedAt).toBeGreaterThanOrEqual(r.startedAt);
    expect(sim!.stats).toStrictEqual({ received: 1, inFlight: 0, aborted: 0, completed: 1 });
  });
});

describe('POST /v1/chat/completions, streaming', () => {
  it('sends role on the first delta only, a finish chunk, then [DONE]; no usage key', async () => {
    const base = await start({ chunks: 3 });
    const res = await chat(base, { ...userMessage('go'), stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const { frames, error } = await collect(res);
    expect(error).toBeNull();
    expect(frames.at(-1)).toBe('data: [DONE]');
    const first = data(frames[0]!) as { id: string; created: number };
    const { id, created } = first;
    expect(frames.slice(0, -1).map(data)).toStrictEqual([
      chunk(id, created, { role: 'assistant', content: 't0 ' }, null),
      chunk(id, created, { content: 't1 ' }, null),
      chunk(id, created, { content: 't2 ' }, null),
      chunk(id, created, {}, 'stop'),
    ]);
  });

  it('when stream_options.include_usage then one usage chunk with empty choices comes before [DONE]', async () => {
    const base = await start({ chunks: 2 });
    const res = await chat(base, {
      ...userMessage('one two three'),
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 1,
    });
    const { frames } = await collect(res);
    const first = data(frames[0]!) as { id: string; created: number };
    const { id, created } = first;
    expect(frames.slice(0, -1).map(data)).toStrictEqual([
      chunk(id, created, { role: 'assistant', content: 't0 ' }, null),
      chunk(id, created, {}, 'length'),
      {
        id,
        object: 'chat.completion.chunk',
        created,
        model: MODEL,
        system_fingerprint: 'fp_ollama',
        choices: [],
        usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
      },
    ]);
    expect(frames.at(-1)).toBe('data: [DONE]');
  });

  it('ignores include_usage when not streaming (still one JSON body)', async () => {
    const base = await start({ chunks: 1 });
    const res = await chat(base, { ...userMessage('x'), stream_options: { include_usage: true } });
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(((await res.json()) as { object: string }).object).toBe('chat.completion');
  });

  it('delivers chunks incrementally when paced', async () => {
    const base = await start({ chunks: 5, tokensPerSecond: 25 });
    const res = await chat(base, { ...userMessage('go'), stream: true });
    const reader = res.body!.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toContain('"t0 "');
    const [record] = sim!.requests;
    expect(record!.completed).toBe(false);
    expect(record!.chunksSent).toBeLessThan(5);
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toContain('"t4 "');
    expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('hold() keeps every stream at its first chunk until released, then each ends whole', async () => {
    const base = await start({ chunks: 3 });
    const release = sim!.hold();
    const readers = await Promise.all(
      ['a', 'b'].map(async (w) => (await chat(base, { ...userMessage(w), stream: true })).body!.getReader()),
    );
    for (const r of readers) expect(new TextDecoder().decode((await r.read()).value)).toContain('"t0 "');
    // A whole request answered after both first chunks: the held streams had every turn to go on.
    expect((await chat(base, userMessage('plain'))).status).toBe(200);
    expect(sim!.requests.map((r) => [r.chunksSent, r.completed])).toStrictEqual([
      [1, false],
      [1, false],
      [0, true],
    ]);
    release();
    for (const r of readers) {
      let rest = '';
      for (let x = await r.read(); !x.done; x = await r.read()) rest += new TextDecoder().decode(x.value);
      expect(rest).toContain('"t2 "');
      expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);
    }
    // A release from a hold that ended is a no-op: it does not end a new hold.
    const again = sim!.hold();
    release();
    const held = (await chat(base, { ...userMessage('c'), stream: true })).body!.getReader();
    await held.read();
    expect((await chat(base, userMessage('plain'))).status).toBe(200);
    expect(sim!.requests.at(-2)!.chunksSent).toBe(1);
    again();
    let rest = '';
    for (let x = await held.read(); !x.done; x = await held.read()) rest += new TextDecoder().decode(x.value);
    expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});

describe('validation, as Ollama', () => {
  const cases: [string, string, number, string, string][] = [
    [
      'missing model',
      JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }),
      400,
      'model is required',
      'invalid_request_error',
    ],
    [
      'empty model',
      JSON.stringify({ model: '', messages: [{ role: 'user', content: 'x' }] }),
      400,
      'model is required',
      'invalid_request_error',
    ],
    [
      'unknown model',
      JSON.stringify({ model: 'nope:1b', messages: [{ role: 'user', content: 'x' }] }),
      404,
      "model 'nope:1b' not found",
      'not_found_error',
    ],
    [
      'empty messages',
      JSON.stringify({ model: MODEL, messages: [] }),
      400,
      "[] is too short - 'messages'",
      'invalid_request_error',
    ],
    [
      'missing messages',
      JSON.stringify({ model: MODEL }),
      400,
      "[] is too short - 'messages'",
      'invalid_request_error',
    ],
    ['bad JSON', '<html>', 400, "invalid character '<' looking for beginning of value", 'invalid_request_error'],
    ['truncated JSON', '{"model":"x"', 400, 'unexpected EOF', 'invalid_request_error'],
    ['empty body', '', 400, 'EOF', 'invalid_request_error'],
    [
      'wrong type',
      JSON.stringify({ model: 7, messages: [] }),
      400,
      'json: cannot unmarshal number into Go struct field ChatCompletionRequest.model of type string',
      'invalid_request_error',
    ],
  ];
  it.each(cases)('%s → %i in the error envelope', async (_name, body, status, message, type) => {
    const base = await start();
    const res = await chat(base, body);
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toStrictEqual({ error: { message, type, param: null, code: null } });
    const [record] = sim!.requests;
    let recorded: unknown = body; // the raw string when it is not JSON
    try {
      recorded = JSON.parse(body);
    } catch {
      // keep the raw string
    }
    expect(record!.body).toStrictEqual(recorded);
  });
});

describe('per-request directives', () => {
  it('overrides knobs for that request only, from the last message', async () => {
    const base = await start({ chunks: 2 });
    const res = await chat(base, userMessage('please [[sim chunks=5 bogus=1 tokensPerSecond=oops]] thanks'));
    expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(
      't0 t1 t2 t3 t4 ',
    );
    const plain = await chat(base, userMessage('no directive'));
    expect(((await plain.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(2);
    const earlier = await chat(base, {
      model: MODEL,
      messages: [
        { role: 'user', content: '[[sim fail=http-error]]' },
        { role: 'user', content: 'last' },
      ],
    });
    expect(earlier.status).toBe(200);
    const failing = await chat(base, userMessage('[[sim fail=http-error errorStatus=503]]'));
    expect(failing.status).toBe(503);
    expect(await failing.json()).toStrictEqual({
      error: {
        message: 'server busy, please try again.  maximum pending requests exceeded',
        type: 'api_error',
        param: null,
        code: null,
      },
    });
  });
});
