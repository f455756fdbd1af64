/**
 * Ollama's own API in the operator's view (docs/operations.md): each native exchange gets its
 * trace span by the GenAI conventions (provider `ollama`; `chat`, `text_completion` and
 * `embeddings`; `options.num_predict` as max_tokens; `done_reason` as the finish reason, from a
 * plain answer and from a stream's last line; usage as charged), and its answers are counted in
 * the metrics under the route's name. The listings and cards generate nothing: no span, no count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let collector: OtlpReceiver;
let key: string;
let keyId: string;
let seen = 0;

async function newSpans(): Promise<ReceivedSpan[]> {
  await d.daemon.ctx.tracing!.flush();
  const out = collector.spans.slice(seen);
  seen = collector.spans.length;
  return out;
}

const post = async (url: string, body: unknown) => {
  const r = await d.daemon.dataPlane.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    payload: JSON.stringify(body),
  });
  return { status: r.statusCode, text: r.body };
};

beforeAll(async () => {
  collector = await startOtlpReceiver();
  ({ sim, url: simUrl } = await startSim({ chunks: 3 }));
  d = await buildInproc({ otlp: { url: `${collector.url}/v1/traces`, serviceName: 'gw-test' }, metricsPort: 0 });
  expect((await d.manage('POST', '/v1/instances', { id: 'gpu', model: MODEL, endpoint: simUrl })).status).toBe(201);
  const ready = await d.manage('POST', '/v1/instances/gpu/ready', { probe: false });
  ({ secret: key, id: keyId } = (ready.json as { defaultKey: { secret: string; id: string } }).defaultKey);
  await newSpans();
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
  await collector?.close();
});

const common = () => ({
  'gen_ai.provider.name': 'ollama',
  'gen_ai.request.model': MODEL,
  'server.address': '127.0.0.1',
  'server.port': Number(new URL(simUrl).port),
  'http.response.status_code': 200,
  'ob_proxy.key.id': keyId,
  'ob_proxy.instance.id': 'gpu',
});

describe('a span per native exchange', () => {
  it('chat, plain: num_predict, temperature and done_reason read, usage as charged', async () => {
    const r = await post('/api/chat', {
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello there' }],
      stream: false,
      options: { num_predict: 2, temperature: 0.5 },
    });
    expect(r.status).toBe(200);
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span!.name).toBe(`chat ${MODEL}`);
    expect(span!.attributes).toEqual({
      ...common(),
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.max_tokens': 2,
      'gen_ai.request.temperature': 0.5,
      'gen_ai.response.model': MODEL,
      'gen_ai.response.finish_reasons': ['length'],
      'gen_ai.usage.input_tokens': 2,
      'gen_ai.usage.output_tokens': 2,
    });
    expect(sim.requests.at(-1)!.headers.traceparent).toBe(`00-${span!.traceId}-${span!.spanId}-01`);
  });

  it('generate, streamed: model and finish reason from the stream’s lines', async () => {
    expect((await post('/api/generate', { model: MODEL, prompt: 'Once upon a time' })).status).toBe(200);
    const [span] = await newSpans();
    expect(span!.name).toBe(`text_completion ${MODEL}`);
    expect(span!.attributes).toEqual({
      ...common(),
      'gen_ai.operation.name': 'text_completion',
      'gen_ai.response.model': MODEL,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 4,
      'gen_ai.usage.output_tokens': 3,
    });
  });

  it('embed: an embeddings span; listings and cards none', async () => {
    expect((await post('/api/embed', { model: MODEL, input: ['a b'] })).status).toBe(200);
    for (const url of ['/api/tags', '/api/ps', '/api/version'])
      expect(
        (await d.daemon.dataPlane.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } }))
          .statusCode,
      ).toBe(200);
    const spans = await newSpans();
    expect(spans.map((s) => s.name)).toEqual([`embeddings ${MODEL}`]);
    expect(spans[0]!.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 2, 'gen_ai.usage.output_tokens': 0 });
  });
});

it('the metrics count native answers under their route’s name, and the listings not at all', async () => {
  const text = await d.daemon.ctx.metrics!.registry.metrics();
  const answers = text
    .split('\n')
    .filter((l) => l.startsWith('ob_proxy_requests_total{'))
    .sort();
  expect(answers).toEqual([
    `ob_proxy_requests_total{instance="gpu",key="${keyId}",code="200",route="ollama_chat"} 1`,
    `ob_proxy_requests_total{instance="gpu",key="${keyId}",code="200",route="ollama_embed"} 1`,
    `ob_proxy_requests_total{instance="gpu",key="${keyId}",code="200",route="ollama_generate"} 1`,
  ]);
});
