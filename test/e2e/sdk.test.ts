import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postChat } from '../helpers/chat.js';
import { type ServeProcess, type SimProcess, cliJson, eventually } from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';

const MODEL = 'gemma4:26b';
let sim: SimProcess;
let serve: ServeProcess;
let home: string;
let key: string;
let client: OpenAI;

interface ReadyJson {
  defaultKey: { secret: string };
}

beforeAll(async () => {
  ({ home, sim, serve, key } = await startDaemonAndSim({ serveArgs: ['--upstream-timeout', '1'] }));
  client = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

async function sdkError(fn: () => Promise<unknown>): Promise<APIError> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof APIError) return err;
    throw err;
  }
  throw new Error('expected an error');
}

describe('the official openai SDK against ob-proxy serve and ob-proxy simulate', () => {
  it('creates a plain chat completion with the shape of docs/contract.md §3.3 and our own id', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
      temperature: 0.2,
    });
    expect(r).toEqual({
      id: expect.stringMatching(/^chatcmpl-[A-Za-z0-9]{24}$/),
      object: 'chat.completion',
      created: expect.any(Number),
      model: MODEL,
      system_fingerprint: 'fp_ollama',
      choices: [
        { index: 0, message: { role: 'assistant', content: 't0 t1 t2 t3 t4 t5 t6 t7 ' }, finish_reason: 'stop' },
      ],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 8, total_tokens: expect.any(Number) },
    });
    const got = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
    expect(got.body).toEqual({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }], temperature: 0.2 });
  });

  it('streams chunk by chunk as the model produces them, with one id, and no usage chunk unless asked', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: 'count [[sim chunks=5 tokensPerSecond=8]]' }],
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    let upstreamDoneAtFirstChunk: boolean | null = null;
    for await (const chunk of stream) {
      if (chunks.length === 0) {
        const last = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
        upstreamDoneAtFirstChunk = last.completed;
      }
      chunks.push(chunk);
    }
    // The first chunk reached the client while the model server was still generating: no buffering.
    expect(upstreamDoneAtFirstChunk).toBe(false);
    const ids = new Set(chunks.map((c) => c.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^chatcmpl-/);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('t0 t1 t2 t3 t4 ');
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.every((c) => c.usage === undefined || c.usage === null)).toBe(true);
    // Usage is asked of the model server for every stream (for the key's counters), not shown.
    const got = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
    expect(got.body).toEqual({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'count [[sim chunks=5 tokensPerSecond=8]]' }],
    });
  });

  it('sends exactly one trailing usage chunk when stream_options.include_usage asks', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Hello' }],
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const withUsage = chunks.filter((c) => c.usage != null);
    expect(withUsage).toHaveLength(1);
    expect(chunks.at(-1)).toEqual({
      id: chunks[0]!.id,
      object: 'chat.completion.chunk',
      created: expect.any(Number),
      model: MODEL,
      system_fingerprint: 'fp_ollama',
      choices: [],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 8, total_tokens: expect.any(Number) },
    });
  });

  it('maps the developer role to system, forwards content parts as sent and carries max_completion_tokens as max_tokens', async () => {
    await client.chat.completions.create({
      model: MODEL,
      max_completion_tokens: 3,
      messages: [
        { role: 'developer', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Hello ' },
            { type: 'text', text: 'there' },
          ],
        },
      ],
    });
    const got = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
    expect(got.body).toEqual({
      model: MODEL,
      max_tokens: 3,
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Hello ' },
            { type: 'text', text: 'there' },
          ],
        },
      ],
    });
  });

  it("lists the one model of the key's instance, and retrieves it by id (any other id is 404 model_not_found)", async () => {
    const page = await client.models.list();
    const model = { id: MODEL, object: 'model', created: expect.any(Number), owned_by: 'ob-proxy' };
    expect(page.data).toEqual([model]);
    expect(await client.models.retrieve(MODEL)).toEqual(model);
    const e = await sdkError(() => client.models.retrieve('llama3:70b'));
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect([e.status, e.code, e.param, e.message]).toEqual([
      404,
      'model_not_found',
      'model',
      '404 This API key serves only "gemma4:26b"; there is no model "llama3:70b" for it.',
    ]);
    const bad = await sdkError(() =>
      new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: 'ob_sk_nope', maxRetries: 0 }).models.retrieve(MODEL),
    );
    expect([bad.status, bad.code]).toEqual([401, 'invalid_api_key']);
  });

  it("never forwards the client's Authorization or Host to the model server", async () => {
    const r = await postChat(
      serve.baseUrl,
      key,
      { model: MODEL, messages: [{ role: 'user', content: 'headers?' }] },
      { 'x-forwarded-host': 'api.example.com' },
    );
    expect(r.status).toBe(200);
    const got = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
    expect(got.headers.authorization).toBeUndefined();
    expect(got.headers.host).toBe(new URL(sim.url).host);
    expect(JSON.stringify(got)).not.toContain(key);
  });

  it('aborts the upstream request when the client goes away mid-stream', async () => {
    const ctrl = new AbortController();
    const stream = await client.chat.completions.create(
      {
        model: MODEL,
        stream: true,
        messages: [{ role: 'user', content: 'long [[sim chunks=200 tokensPerSecond=20]]' }],
      },
      { signal: ctrl.signal },
    );
    let n = 0;
    try {
      for await (const _ of stream) {
        if (++n === 2) {
          ctrl.abort();
          break;
        }
      }
    } catch {
      // an aborted iteration may throw APIUserAbortError; either way the client is gone
    }
    expect(n).toBe(2);
    const aborted = await eventually(
      async () => (await sim.requests()).find((r) => JSON.stringify(r.body).includes('long [[sim') && r.aborted),
      'upstream abort',
    );
    expect(aborted.completed).toBe(false);
    expect(aborted.chunksSent).toBeLessThan(200);
  });

  it('aborts the upstream request when a non-streaming client goes away', async () => {
    const ctrl = new AbortController();
    const p = client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'slow-plain [[sim firstTokenDelayMs=800]]' }] },
      { signal: ctrl.signal },
    );
    await eventually(
      async () => (await sim.requests()).some((r) => JSON.stringify(r.body).includes('slow-plain')),
      'upstream got it',
    );
    ctrl.abort();
    await expect(p).rejects.toThrow();
    await eventually(
      async () => (await sim.requests()).find((r) => JSON.stringify(r.body).includes('slow-plain') && r.aborted),
      'upstream abort',
    );
  });
});

describe('each status of docs/contract.md §3 surfaces as the SDK error class with our code', () => {
  const hello = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hello' }] };

  it('400 missing_api_key with the whole OpenAI error body', async () => {
    const r = await postChat(serve.baseUrl, null, hello);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: {
        message: expect.stringContaining('Authorization: Bearer'),
        type: 'invalid_request_error',
        code: 'missing_api_key',
        param: null,
      },
    });
  });

  it('401 invalid_api_key', async () => {
    const bad = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: 'ob_sk_not-a-real-key', maxRetries: 0 });
    const e = await sdkError(() => bad.chat.completions.create(hello));
    expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
    expect([e.status, e.code, e.type]).toEqual([401, 'invalid_api_key', 'authentication_error']);
  });

  it('400 invalid_request with the field path in param', async () => {
    const e = await sdkError(() => client.chat.completions.create({ ...hello, temperature: 3 }));
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect([e.status, e.code, e.param]).toEqual([400, 'invalid_request', 'temperature']);
    const e2 = await sdkError(() =>
      client.chat.completions.create({ model: MODEL, messages: [{ role: 7 as unknown as 'user', content: 'x' }] }),
    );
    expect([e2.code, e2.param, e2.message]).toEqual([
      'invalid_request',
      'messages[0].role',
      '400 messages[0].role must be a string.',
    ]);
    // The cap the gate charges is read, and refused when it cannot be.
    const e3 = await sdkError(() => client.chat.completions.create({ ...hello, max_tokens: 0 }));
    expect([e3.code, e3.param]).toEqual(['invalid_request', 'max_tokens']);
  });

  it('400 invalid_json for a body that is not JSON', async () => {
    const r = await postChat(serve.baseUrl, key, '{"model": ');
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: {
        message: expect.stringContaining('not valid JSON'),
        type: 'invalid_request_error',
        code: 'invalid_json',
        param: null,
      },
    });
  });

  it('400 model_mismatch', async () => {
    const e = await sdkError(() => client.chat.completions.create({ ...hello, model: 'qwen3.6:27b' }));
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect([e.status, e.code, e.param]).toEqual([400, 'model_mismatch', 'model']);
  });

  it('passes a model server error status on in our shape', async () => {
    const e = await sdkError(() =>
      client.chat.completions.create({
        ...hello,
        messages: [{ role: 'user', content: 'x [[sim fail=http-error errorStatus=503]]' }],
      }),
    );
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect(e.status).toBe(503);
    expect(e.code).toBe('upstream_error');
    expect(e.message).toContain('server busy');
  });

  it('504 upstream_timeout when the model server sends no headers in time', async () => {
    const e = await sdkError(() =>
      client.chat.completions.create({ ...hello, messages: [{ role: 'user', content: 'x [[sim fail=hang]]' }] }),
    );
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect([e.status, e.code]).toEqual([504, 'upstream_timeout']);
  });

  it('a stream the model server cuts short ends with an error event, which the SDK raises', async () => {
    const stream = await client.chat.completions.create({
      ...hello,
      stream: true,
      messages: [{ role: 'user', content: 'x [[sim fail=eof-mid-stream failAfterChunks=2]]' }],
    });
    const seen: string[] = [];
    const e = await sdkError(async () => {
      for await (const c of stream) seen.push(c.choices[0]?.delta.content ?? '');
    });
    expect(seen.join('')).toBe('t0 t1 ');
    expect(e.message).toContain('ended the stream');
  });

  it('409, 404 and 401 revoked follow the instance through the CLI', async () => {
    await cliJson(['instances', 'add', 'gpu-2', '--model', MODEL, '--endpoint', sim.url], home);
    const k2 = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-2'], home)).defaultKey.secret;
    const c2 = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: k2, maxRetries: 0 });
    await cliJson(['instances', 'pending', 'gpu-2'], home);
    let e = await sdkError(() => c2.chat.completions.create(hello));
    expect(e).toBeInstanceOf(OpenAI.ConflictError);
    expect([e.status, e.code]).toEqual([409, 'deployment_not_ready']);
    await cliJson(['instances', 'remove', 'gpu-2'], home);
    e = await sdkError(() => c2.chat.completions.create(hello));
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect([e.status, e.code]).toEqual([404, 'deployment_not_found']);

    await cliJson(['instances', 'add', 'gpu-3', '--model', MODEL, '--endpoint', sim.url], home);
    const k3 = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-3'], home)).defaultKey.secret;
    await cliJson(['instances', 'stop', 'gpu-3'], home);
    const c3 = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: k3, maxRetries: 0 });
    e = await sdkError(() => c3.chat.completions.create(hello));
    expect(e).toBeInstanceOf(OpenAI.AuthenticationError);
    expect([e.status, e.code]).toEqual([401, 'revoked_api_key']);
  });

  it('502 upstream_unavailable when the model server cannot be reached', async () => {
    await cliJson(['instances', 'add', 'gpu-dead', '--model', MODEL, '--endpoint', 'http://127.0.0.1:9'], home);
    const k = (await cliJson<ReadyJson>(['instances', 'ready', 'gpu-dead', '--no-probe'], home)).defaultKey.secret;
    const c = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: k, maxRetries: 0 });
    const e = await sdkError(() => c.chat.completions.create(hello));
    expect(e).toBeInstanceOf(OpenAI.InternalServerError);
    expect([e.status, e.code]).toEqual([502, 'upstream_unavailable']);
  });

  it("keeps every secret out of the daemon's logs", () => {
    const logs = serve.lines.join('\n');
    expect(logs).not.toMatch(/ob_sk_[0-9A-Za-z]{12}_/);
    expect(logs).not.toContain(key);
  });
});
