/**
 * OpenTelemetry traces of exchanges (docs/operations.md#traces), in process: a daemon with an
 * OTLP endpoint sends its spans to a test collector (test/helpers/traced-daemon.ts), whose
 * decoded spans are asserted whole. A span per chat, Responses or Messages exchange, plain or
 * streamed, with the GenAI semantic conventions; the `traceparent` the simulator, the model
 * server, received, a client's trace joined or a bad one dropped; with tracing off, no trace
 * context sent on. test/e2e/traces.test.ts does the same once through `ob-proxy serve`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, chatRequests } from '../helpers/inproc.js';
import type { ReceivedSpan } from '../helpers/otlp-receiver.js';
import { CLIENT, ERROR, type TracedDaemon, hello, startTracedDaemon } from '../helpers/traced-daemon.js';

let t: TracedDaemon;
let d: Inproc;
let sim: Simulator;
let simUrl: string;
let secrets: Record<string, string>;
let keyIds: Record<string, string>;

const newSpans = (): Promise<ReceivedSpan[]> => t.newSpans();
const simPort = (): number => t.simPort();

beforeAll(async () => {
  t = await startTracedDaemon();
  ({ d, sim, simUrl, secrets, keyIds } = t);
});

afterAll(async () => {
  await t?.close();
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

describe('what the exchanges above exported', () => {
  it('no secret anywhere, nor a message', async () => {
    await newSpans();
    const all = Buffer.concat(t.collector.raw).toString('utf8');
    expect(all.length).toBeGreaterThan(1000);
    for (const [name, secret] of Object.entries(secrets)) {
      expect(all.includes(secret), name).toBe(false);
      // Nor its random part alone (the secret without its prefix and id).
      expect(all.includes(secret.slice(-20)), `${name}'s tail`).toBe(false);
    }
    expect(all).not.toContain('Hello there');
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
