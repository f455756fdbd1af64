/**
 * OpenTelemetry traces end to end: `ob-proxy serve --otlp-endpoint` as a real process, the
 * simulator as another, the openai SDK as the client and a test collector
 * (test/helpers/otlp-receiver.ts). The span of a streamed chat joins the client's trace and is the
 * parent of what the model server received; a refusal has its span; the spans of the last
 * requests reach the collector at shutdown; no secret is in anything exported.
 * test/inproc/traces-exchanges.test.ts and test/inproc/traces-refusals-export.test.ts assert each
 * kind of span in detail.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';
import type { ServeProcess, SimProcess } from '../helpers/processes.js';

const MODEL = 'gemma4:26b';
const PARENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_SPAN = '00f067aa0ba902b7';

let collector: OtlpReceiver;
let sim: SimProcess;
let serve: ServeProcess;
let secret: string;
let keyId: string;

beforeAll(async () => {
  collector = await startOtlpReceiver();
  const d = await startDaemonAndSim({
    serveArgs: ['--otlp-endpoint', collector.url, '--log-level', 'info'],
    env: { OB_PROXY_OTLP_SERVICE_NAME: 'gw-e2e' },
    instances: ['gpu'],
  });
  ({ sim, serve } = d);
  ({ secret, id: keyId } = d.keys.gpu!);
}, 60_000);

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
  await collector?.close();
});

describe('ob-proxy serve --otlp-endpoint', () => {
  it("a stream's span joins the client's trace, and its traceparent reached the model server", async () => {
    const client = new OpenAI({
      apiKey: secret,
      baseURL: `${serve.baseUrl}/v1`,
      defaultHeaders: { traceparent: `00-${PARENT_TRACE}-${PARENT_SPAN}-01` },
      maxRetries: 0,
    });
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hello' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) usage ??= chunk.usage;
    expect(usage?.completion_tokens).toBeGreaterThan(0);

    const [span] = await collector.waitFor(1);
    expect(span).toMatchObject({
      traceId: PARENT_TRACE,
      parentSpanId: PARENT_SPAN,
      name: `chat ${MODEL}`,
      kind: 3,
      resource: { 'service.name': 'gw-e2e' },
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': MODEL,
        'gen_ai.response.finish_reasons': ['stop'],
        'gen_ai.usage.input_tokens': usage!.prompt_tokens,
        'gen_ai.usage.output_tokens': usage!.completion_tokens,
        'server.address': '127.0.0.1',
        'server.port': Number(new URL(sim.url).port),
        'http.response.status_code': 200,
        'ob_proxy.key.id': keyId,
        'ob_proxy.instance.id': 'gpu',
      },
    });
    const chats = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions');
    expect(chats.map((r) => r.headers.traceparent)).toEqual([`00-${PARENT_TRACE}-${span!.spanId}-01`]);
    expect(chats[0]!.headers.authorization).toBeUndefined();
  });

  it('a refusal and the last requests before SIGTERM reach the collector at shutdown', async () => {
    const had = collector.spans.length;
    const refused = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer ob_sk_wrong', 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(refused.status).toBe(401);
    const ok = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(ok.status).toBe(200);
    // Stopped at once: the batch's delay has not passed, so the shutdown's flush sends them.
    expect(await serve.stop('SIGTERM')).toBe(0);
    const spans = collector.spans.slice(had);
    expect(spans.map((s) => [s.name, s.attributes['http.response.status_code'], s.attributes['error.type']])).toEqual([
      ['chat', 401, 'invalid_api_key'],
      [`chat ${MODEL}`, 200, undefined],
    ]);
    const all = Buffer.concat(collector.raw).toString('utf8');
    expect(all.includes(secret)).toBe(false);
    expect(all.includes(secret.slice(-20))).toBe(false);
  });
});
