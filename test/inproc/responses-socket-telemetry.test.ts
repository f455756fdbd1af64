/**
 * A Responses WebSocket's responses in the daemon's traces and metrics, each counted as one
 * request, as over HTTP: a span per response sent upstream, child of the trace the client's
 * upgrade named, whose `traceparent` the model server received; `ob_proxy_requests_total` with
 * `route="responses"` for every message answered, refusals included.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance, responsesSent } from '../helpers/inproc-responses.js';
import { CLIENT, ERROR, type TracedDaemon, startTracedDaemon } from '../helpers/traced-daemon.js';
import { SocketClient, refusedUpgrade, responseIn } from '../helpers/socket-client.js';

let t: TracedDaemon;

beforeAll(async () => {
  t = await startTracedDaemon();
  await t.d.daemon.listen();
});

afterAll(async () => {
  await t?.close();
});

it("a span per response, each a child of the upgrade's trace, whose traceparent the model server got", async () => {
  const parent = '0af7651916cd43dd8448eb211c80319c';
  const c = await SocketClient.open(t.d.daemon.ctx.baseUrl, t.secrets.live!, {
    traceparent: `00-${parent}-b7ad6b7169203331-01`,
  });
  const before = responsesSent(t.sim).length;
  const r1 = responseIn(await c.create({ model: MODEL, input: 'one [[sim chunks=2]]', max_output_tokens: 64 }));
  const r2 = responseIn(await c.create({ model: MODEL, previous_response_id: r1.id, input: 'two [[sim chunks=1]]' }));
  // A message refused in the socket is no exchange: no span.
  await c.create({ model: 'qwen3.6:27b', input: 'x' });
  const spans = await t.newSpans();
  expect(spans).toHaveLength(2);
  for (const [span, r] of [
    [spans[0]!, r1],
    [spans[1]!, r2],
  ] as const) {
    const usage = r.usage as { input_tokens: number; output_tokens: number };
    expect(span).toMatchObject({
      name: `chat ${MODEL}`,
      kind: CLIENT,
      traceId: parent,
      parentSpanId: 'b7ad6b7169203331',
    });
    expect(span.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': MODEL,
      'gen_ai.usage.input_tokens': usage.input_tokens,
      'gen_ai.usage.output_tokens': usage.output_tokens,
      'http.response.status_code': 200,
      'ob_proxy.key.id': t.keyIds.live,
      'ob_proxy.instance.id': 'live',
    });
  }
  expect(spans[0]!.attributes['gen_ai.request.max_tokens']).toBe(64);
  const sent = t.sim.requests.filter((r) => r.path === '/v1/responses').slice(before);
  expect(sent.map((r) => r.headers.traceparent)).toEqual(spans.map((s) => `00-${parent}-${s.spanId}-01`));
  c.close();
});

it('an upgrade refused is a refused request: a span with its code, and no socket', async () => {
  const refused = await refusedUpgrade(SocketClient.open(t.d.daemon.ctx.baseUrl, t.secrets.pending!));
  expect(refused.status).toBe(409);
  expect((refused.body as { error: { code: string } }).error.code).toBe('deployment_not_ready');
  const [span, ...more] = await t.newSpans();
  expect(more).toEqual([]);
  expect(span).toMatchObject({ name: 'chat', status: { code: ERROR, message: 'deployment_not_ready' } });
});

it('every message answered counts in ob_proxy_requests_total under route="responses"', async () => {
  const d = await buildInproc({ metricsPort: 0, metricsHost: '127.0.0.1' });
  const { sim, url } = await startSim();
  try {
    await d.daemon.listen();
    const key = await readyInstance(d, 'gpu-1', url);
    const c = await SocketClient.open(d.daemon.ctx.baseUrl, key);
    await c.create({ model: MODEL, input: 'one [[sim chunks=1]]' });
    await c.create({ model: MODEL, input: 'two [[sim chunks=1]]' });
    await c.create({ model: 'qwen3.6:27b', input: 'x' });
    await c.create({ model: MODEL, previous_response_id: 'resp_nothing', input: 'x' });
    const scraped = await (d.daemon.ctx.metrics as { scrape(): Promise<string> }).scrape();
    const lines = scraped.split('\n').filter((l) => l.startsWith('ob_proxy_requests_total{'));
    expect(lines).toEqual([
      expect.stringMatching(/^ob_proxy_requests_total\{instance="gpu-1",key="\w+",code="200",route="responses"\} 2$/),
      expect.stringMatching(/^ob_proxy_requests_total\{instance="gpu-1",key="\w+",code="400",route="responses"\} 2$/),
    ]);
    c.close();
  } finally {
    await d.close();
    await sim.close();
  }
});
