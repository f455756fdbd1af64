/**
 * OpenTelemetry traces (docs/operations.md#traces), in process: a daemon with an OTLP endpoint
 * sends its spans to a test collector on 127.0.0.1:0 (test/helpers/otlp-receiver.ts), whose
 * decoded spans are asserted whole, and the simulator, the model server, shows the
 * `traceparent` it received. test/e2e/traces.test.ts does the same once through `ob-proxy serve`.
 */
import { type Socket, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, chatRequests, startSim } from '../helpers/inproc.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.js';

const CLIENT = 3; // OTLP's SPAN_KIND_CLIENT
const ERROR = 2; // OTLP's STATUS_CODE_ERROR

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let collector: OtlpReceiver;
const secrets: Record<string, string> = {};
const keyIds: Record<string, string> = {};

const hello = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'Hello there' }],
  ...extra,
});

async function readyInstance(id: string): Promise<void> {
  expect((await d.manage('POST', '/v1/instances', { id, model: MODEL, endpoint: simUrl })).status).toBe(201);
  const ready = await d.manage('POST', `/v1/instances/${id}/ready`, {});
  const key = (ready.json as { defaultKey: { id: string; secret: string } }).defaultKey;
  secrets[id] = key.secret;
  keyIds[id] = key.id;
}

/** The spans sent since the last call, once the daemon has flushed them. */
let seen = 0;
async function newSpans(): Promise<ReceivedSpan[]> {
  await d.daemon.ctx.tracing!.flush();
  const out = collector.spans.slice(seen);
  seen = collector.spans.length;
  return out;
}

const simPort = (): number => Number(new URL(simUrl).port);

beforeAll(async () => {
  collector = await startOtlpReceiver();
  ({ sim, url: simUrl } = await startSim());
  d = await buildInproc({ otlp: { url: `${collector.url}/v1/traces`, serviceName: 'gw-test' } });
  await readyInstance('live');
  await readyInstance('pending');
  await d.manage('POST', '/v1/instances/pending/pending', {});
  await readyInstance('revoked');
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  const limited = await d.manage('POST', '/v1/keys', { instance: 'live', name: 'one-a-minute', limits: { rpm: 1 } });
  secrets.limited = (limited.json as { secret: string }).secret;
  keyIds.limited = (limited.json as { id: string }).id;
  await newSpans();
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
  await collector?.close();
});

describe('a span per exchange, with the GenAI semantic conventions', () => {
  it('a plain chat: its span, and the model server saw its traceparent', async () => {
    const before = chatRequests(sim).length;
    const r = await d.chat(secrets.live!, hello({ temperature: 0.5, top_p: 0.9, max_tokens: 64 }));
    expect(r.status).toBe(200);
    const body = r.json as { usage: { prompt_tokens: number; completion_tokens: number }; model: string };
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span).toMatchObject({
      name: `chat ${MODEL}`,
      kind: CLIENT,
      parentSpanId: '',
      status: { code: 0, message: '' },
      resource: { 'service.name': 'gw-test', 'service.version': 'test' },
    });
    expect(span!.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(span!.endNs > span!.startNs).toBe(true);
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': MODEL,
      'gen_ai.request.max_tokens': 64,
      'gen_ai.request.temperature': 0.5,
      'gen_ai.request.top_p': 0.9,
      'gen_ai.response.model': body.model,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': body.usage.prompt_tokens,
      'gen_ai.usage.output_tokens': body.usage.completion_tokens,
      'server.address': '127.0.0.1',
      'server.port': simPort(),
      'http.response.status_code': 200,
      'ob_proxy.key.id': keyIds.live,
      'ob_proxy.instance.id': 'live',
    });
    const sent = chatRequests(sim).slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.headers.traceparent).toBe(`00-${span!.traceId}-${span!.spanId}-01`);
    expect(sent[0]!.headers.tracestate).toBeUndefined();
    expect(sent[0]!.headers.authorization).toBeUndefined();
  });

  it('a stream with usage: counts from its usage chunk, model and finish reason from its events', async () => {
    const before = chatRequests(sim).length;
    const r = await d.chat(secrets.live!, hello({ stream: true, stream_options: { include_usage: true } }));
    expect(r.status).toBe(200);
    const events = r.text
      .split('\n\n')
      .filter((f) => f.startsWith('data: {'))
      .map((f) => JSON.parse(f.slice(6)) as Record<string, unknown>);
    const usage = events.at(-1)!.usage as { prompt_tokens: number; completion_tokens: number };
    const finish = events
      .flatMap((e) => (e.choices as { finish_reason: string | null }[]) ?? [])
      .map((c) => c.finish_reason)
      .filter((f) => f !== null);
    expect(finish).toEqual(['stop']);
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span!.name).toBe(`chat ${MODEL}`);
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': MODEL,
      'gen_ai.response.model': events[0]!.model,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': usage.prompt_tokens,
      'gen_ai.usage.output_tokens': usage.completion_tokens,
      'server.address': '127.0.0.1',
      'server.port': simPort(),
      'http.response.status_code': 200,
      'ob_proxy.key.id': keyIds.live,
      'ob_proxy.instance.id': 'live',
    });
    const sent = chatRequests(sim).slice(before);
    expect(sent[0]!.headers.traceparent).toBe(`00-${span!.traceId}-${span!.spanId}-01`);
  });

  it("a client's valid traceparent makes the span its child; its tracestate goes on", async () => {
    const before = chatRequests(sim).length;
    const parent = '0af7651916cd43dd8448eb211c80319c';
    const r = await d.chat(secrets.live!, hello(), {
      traceparent: `00-${parent}-b7ad6b7169203331-00`,
      tracestate: 'vendor=abc,other=x1',
    });
    expect(r.status).toBe(200);
    const [span] = await newSpans();
    expect(span!.traceId).toBe(parent);
    expect(span!.parentSpanId).toBe('b7ad6b7169203331');
    const sent = chatRequests(sim).slice(before)[0]!;
    // Recorded whatever the client's sampled flag: the operator decides what is traced.
    expect(sent.headers.traceparent).toBe(`00-${parent}-${span!.spanId}-01`);
    expect(sent.headers.tracestate).toBe('vendor=abc,other=x1');
  });

  it('an invalid traceparent starts a new trace, and is not sent on', async () => {
    const before = chatRequests(sim).length;
    const r = await d.chat(secrets.live!, hello(), { traceparent: '00-zz-not-a-trace\r', tracestate: 'a=b' });
    expect(r.status).toBe(200);
    const [span] = await newSpans();
    expect(span!.parentSpanId).toBe('');
    const sent = chatRequests(sim).slice(before)[0]!;
    expect(sent.headers.traceparent).toBe(`00-${span!.traceId}-${span!.spanId}-01`);
    expect(sent.headers.tracestate).toBeUndefined();
  });

  it("a model server's failure: the span carries our error code", async () => {
    const r = await d.chat(secrets.live!, {
      model: MODEL,
      messages: [{ role: 'user', content: 'x [[sim fail=http-error errorStatus=503]]' }],
    });
    const code = (r.json as { error: { code: string } } | null)?.error.code;
    const [span] = await newSpans();
    expect(span!.status).toEqual({ code: ERROR, message: 'upstream_error' });
    expect(span!.attributes).toMatchObject({
      'error.type': 'upstream_error',
      'http.response.status_code': r.status,
      'ob_proxy.key.id': keyIds.live,
    });
    expect(r.status).toBe(503);
    expect(code).toBe('upstream_error');
  });

  it('a Responses API request: operation chat, its model and usage, its traceparent upstream', async () => {
    const before = sim.requests.length;
    const res = await d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secrets.live!}` },
      payload: JSON.stringify({ model: MODEL, input: 'Hello there', temperature: 0.25, max_output_tokens: 32 }),
    });
    expect(res.statusCode).toBe(200);
    const body = JSON.parse(res.body) as {
      model: string;
      status: string;
      usage: { input_tokens: number; output_tokens: number };
    };
    expect(body.usage.input_tokens).toBeGreaterThan(0);
    expect(body.usage.output_tokens).toBeGreaterThan(0);
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span).toMatchObject({ name: `chat ${MODEL}`, kind: CLIENT, status: { code: 0, message: '' } });
    // A Responses answer has no choices: its status says why it ended.
    expect(body.status).toBe('completed');
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': MODEL,
      'gen_ai.request.max_tokens': 32,
      'gen_ai.request.temperature': 0.25,
      'gen_ai.response.model': body.model,
      'gen_ai.response.finish_reasons': ['completed'],
      'gen_ai.usage.input_tokens': body.usage.input_tokens,
      'gen_ai.usage.output_tokens': body.usage.output_tokens,
      'server.address': '127.0.0.1',
      'server.port': simPort(),
      'http.response.status_code': 200,
      'ob_proxy.key.id': keyIds.live,
      'ob_proxy.instance.id': 'live',
    });
    const sent = sim.requests.slice(before).filter((r) => r.path === '/v1/responses');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.headers.traceparent).toBe(`00-${span!.traceId}-${span!.spanId}-01`);
  });

  it('a streamed Responses request: its model read from the stream, its usage from response.completed', async () => {
    const res = await d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${secrets.live!}` },
      payload: JSON.stringify({ model: MODEL, input: 'Hello there', stream: true }),
    });
    expect(res.statusCode).toBe(200);
    const completed = res.body
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; response?: Record<string, unknown> })
      .find((e) => e.type === 'response.completed')!.response as {
      model: string;
      status: string;
      usage: { input_tokens: number; output_tokens: number };
    };
    expect(completed.status).toBe('completed');
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': MODEL,
      'gen_ai.response.model': completed.model,
      'gen_ai.response.finish_reasons': ['completed'],
      'gen_ai.usage.input_tokens': completed.usage.input_tokens,
      'gen_ai.usage.output_tokens': completed.usage.output_tokens,
      'server.address': '127.0.0.1',
      'server.port': simPort(),
      'http.response.status_code': 200,
      'ob_proxy.key.id': keyIds.live,
      'ob_proxy.instance.id': 'live',
    });
  });
});

describe('a Messages API exchange is Anthropic-flavoured', () => {
  const send = (body: Record<string, unknown>) =>
    d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'content-type': 'application/json', 'x-api-key': secrets.live!, 'anthropic-version': '2023-06-01' },
      payload: JSON.stringify({
        model: MODEL,
        max_tokens: 64,
        messages: [{ role: 'user', content: 'Hello there' }],
        ...body,
      }),
    });

  it('plain: provider anthropic, its stop_reason as the finish reason', async () => {
    const res = await send({});
    expect(res.statusCode).toBe(200);
    const body = JSON.parse(res.body) as {
      model: string;
      stop_reason: string;
      usage: { input_tokens: number; output_tokens: number };
    };
    expect(body.stop_reason).toBe('end_turn');
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.request.model': MODEL,
      'gen_ai.request.max_tokens': 64,
      'gen_ai.response.model': body.model,
      'gen_ai.response.finish_reasons': ['end_turn'],
      'gen_ai.usage.input_tokens': body.usage.input_tokens,
      'gen_ai.usage.output_tokens': body.usage.output_tokens,
      'server.address': '127.0.0.1',
      'server.port': simPort(),
      'http.response.status_code': 200,
      'ob_proxy.key.id': keyIds.live,
      'ob_proxy.instance.id': 'live',
    });
  });

  it('a refusal on the route: its span says anthropic too', async () => {
    const res = await d.daemon.dataPlane.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'content-type': 'application/json', 'x-api-key': 'ob_sk_not-a-key-at-all' },
      payload: '{}',
    });
    expect(res.statusCode).toBe(401);
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span).toMatchObject({ name: 'chat', kind: CLIENT, status: { code: ERROR, message: 'invalid_api_key' } });
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'anthropic',
      'http.response.status_code': 401,
      'error.type': 'invalid_api_key',
    });
  });

  it('streamed: the stop_reason of message_delta, the model of message_start', async () => {
    const res = await send({ stream: true, max_tokens: 3 });
    expect(res.statusCode).toBe(200);
    const events = res.body
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
    const start = events.find((e) => e.type === 'message_start')!.message as { model: string };
    const delta = events.find((e) => e.type === 'message_delta') as {
      delta: { stop_reason: string };
      usage: { input_tokens?: number; output_tokens: number };
    };
    expect(delta.delta.stop_reason).toBe('max_tokens');
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span!.attributes).toMatchObject({
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.response.model': start.model,
      'gen_ai.response.finish_reasons': ['max_tokens'],
      'gen_ai.usage.output_tokens': delta.usage.output_tokens,
    });
  });
});

describe('refusals get spans, with their error code', () => {
  const refusal = (status: number, code: string, ids: Record<string, string> = {}): Record<string, unknown> => ({
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'http.response.status_code': status,
    'error.type': code,
    ...ids,
  });

  type Case = readonly [string, () => string | null, number, string, () => Record<string, string>];
  it.each<Case>([
    ['no key (400)', () => null, 400, 'missing_api_key', () => ({})],
    ['an unknown key (401)', () => 'ob_sk_not-a-key-at-all', 401, 'invalid_api_key', () => ({})],
    [
      'a revoked key (401): the key is known, its ids are set',
      () => secrets.revoked!,
      401,
      'revoked_api_key',
      () => ({ 'ob_proxy.key.id': keyIds.revoked!, 'ob_proxy.instance.id': 'revoked' }),
    ],
    [
      'a deployment not ready (409)',
      () => secrets.pending!,
      409,
      'deployment_not_ready',
      () => ({ 'ob_proxy.key.id': keyIds.pending!, 'ob_proxy.instance.id': 'pending' }),
    ],
    [
      'a body that is not JSON (400), after the key passed',
      () => secrets.live!,
      400,
      'invalid_json',
      () => ({ 'ob_proxy.key.id': keyIds.live!, 'ob_proxy.instance.id': 'live' }),
    ],
  ])('%s', async (_name, key, status, code, ids) => {
    const r = await d.chat(key(), code === 'invalid_json' ? '{"model":' : hello());
    expect(r.status).toBe(status);
    expect((r.json as { error: { code: string } }).error.code).toBe(code);
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span).toMatchObject({ name: 'chat', kind: CLIENT, status: { code: ERROR, message: code } });
    expect(span!.attributes).toEqual(refusal(status, code, ids()));
  });

  it("a key over its rpm (429): the first request's span, then the refusal's", async () => {
    expect((await d.chat(secrets.limited!, hello())).status).toBe(200);
    const r = await d.chat(secrets.limited!, hello());
    expect(r.status).toBe(429);
    const [ok, refused, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(ok!.attributes['http.response.status_code']).toBe(200);
    expect(refused!.attributes).toEqual(
      refusal(429, 'rate_limited', { 'ob_proxy.key.id': keyIds.limited!, 'ob_proxy.instance.id': 'live' }),
    );
  });

  it('a model listing is no GenAI operation: no span', async () => {
    const r = await d.daemon.dataPlane.inject({
      method: 'GET',
      url: '/v1/models',
      headers: { authorization: `Bearer ${secrets.live!}` },
    });
    expect(r.statusCode).toBe(200);
    const bad = await d.daemon.dataPlane.inject({ method: 'GET', url: '/v1/models' });
    expect(bad.statusCode).toBe(400);
    expect(await newSpans()).toEqual([]);
  });
});

describe('what the collector receives, and what it does not', () => {
  it('no secret anywhere in what was exported, nor a message', () => {
    const all = Buffer.concat(collector.raw).toString('utf8');
    expect(all.length).toBeGreaterThan(1000);
    for (const [name, secret] of Object.entries(secrets)) {
      expect(all.includes(secret), name).toBe(false);
      // Nor its random part alone (the secret without its prefix and id).
      expect(all.includes(secret.slice(-20)), `${name}'s tail`).toBe(false);
    }
    expect(all).not.toContain('Hello there');
    expect(new Set(collector.paths)).toEqual(new Set(['/v1/traces']));
    expect(new Set(collector.contentTypes)).toEqual(new Set(['application/json']));
  });

  it('a collector that refuses spans: requests are answered, the log says so once, and again when it is back', async () => {
    // 400: refused for good, not retried (a 503 is retried with back-off, for seconds).
    collector.failWith = 400;
    const warnings = (): unknown[] => d.logs.filter((l) => String(l.msg).startsWith('the trace collector'));
    const had = warnings().length;
    for (let i = 0; i < 2; i++) {
      expect((await d.chat(secrets.live!, hello())).status).toBe(200);
      await expect(d.daemon.ctx.tracing!.flush()).rejects.toThrow();
    }
    expect(warnings().slice(had)).toMatchObject([
      {
        level: 40,
        collector: `${collector.url}/v1/traces`,
        msg: 'the trace collector did not take spans: they are dropped until it does (requests are not affected)',
      },
    ]);
    collector.failWith = null;
    expect((await d.chat(secrets.live!, hello())).status).toBe(200);
    await newSpans();
    expect(warnings().slice(had + 1)).toMatchObject([{ level: 30, msg: 'the trace collector takes spans again' }]);
  });
});

describe('a collector that takes connections and never answers', () => {
  it('holds no request, and no shutdown past its bound (an export waits up to 10 s)', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((s) => sockets.push(s));
    await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
    const port = (silent.address() as { port: number }).port;
    const hung = await buildInproc({ otlp: { url: `http://127.0.0.1:${port}/v1/traces`, serviceName: 'x' } });
    try {
      expect((await hung.manage('POST', '/v1/instances', { id: 'a', model: MODEL, endpoint: simUrl })).status).toBe(
        201,
      );
      const ready = await hung.manage('POST', '/v1/instances/a/ready', {});
      const secret = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
      for (let i = 0; i < 3; i++) expect((await hung.chat(secret, hello({ stream: i === 1 }))).status).toBe(200);
      void hung.daemon.ctx.tracing!.flush().catch(() => {});
      // shutdown(0): the spans get their 1 s, then the daemon stops, the export still unanswered.
      await hung.close();
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((done) => silent.close(done));
    }
  });
});

describe('tracing off (no --otlp-endpoint)', () => {
  it("no tracer, and a client's trace context is not sent on: the model server gets our headers only", async () => {
    const plain = await buildInproc();
    try {
      expect(plain.daemon.ctx.tracing).toBeNull();
      expect((await plain.manage('POST', '/v1/instances', { id: 'a', model: MODEL, endpoint: simUrl })).status).toBe(
        201,
      );
      const ready = await plain.manage('POST', '/v1/instances/a/ready', {});
      const secret = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
      const before = chatRequests(sim).length;
      const r = await plain.chat(secret, hello(), {
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'vendor=abc',
      });
      expect(r.status).toBe(200);
      const sent = chatRequests(sim).slice(before);
      expect(sent).toHaveLength(1);
      expect(Object.keys(sent[0]!.headers).sort()).toEqual([
        'accept',
        'accept-encoding',
        'connection',
        'content-length',
        'content-type',
        'host',
        'x-request-id',
      ]);
    } finally {
      await plain.close();
    }
  });
});
