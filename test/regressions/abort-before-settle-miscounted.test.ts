/**
 * Regression (hostile model server): the stream relay aborted the upstream
 * request before settling the exchange, and undici calls the error callback within abort(),
 * which found the exchange still open and took the abort for a network failure:
 * - on an upstream error event, or an event refused (not JSON, not SSE, over the frame cap), the
 *   failure was told twice, the second time as `upstream_unavailable`: two counts in
 *   `ob_proxy_upstream_errors_total`, two "model server failed" lines;
 * - on a body kept open past the drain after `[DONE]` (1 s or 16 KiB), a stream the client had
 *   received whole was counted as an error of the key's usage (`ob-proxy usage`: errors 1) and as
 *   `upstream_unavailable`.
 * The exchange is now settled before the abort: one `upstream_error` per refused stream, and a
 * whole stream counts as one.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorEvents, expectUpstreamAborted } from '../helpers/hostile-upstream.js';
import {
  type Harness,
  chatBody,
  eventually,
  expectedTokens,
  post,
  readyInstance,
  startHarness,
  sseFrames,
  startSim,
  streamTokens,
} from '../reliability/harness.js';
import type { Simulator } from '../../simulator/simulator.js';

let h: Harness;
let sim: Simulator;
let key: string;
beforeAll(async () => {
  h = await startHarness({ metricsPort: 0 });
  const s = await startSim({ chunks: 4 });
  sim = s.sim;
  key = await readyInstance(h, 'gpu-1', s.url);
});
afterAll(async () => {
  await h.stop();
  await sim.close();
});

/** `ob_proxy_upstream_errors_total` of gpu-1, by kind. */
async function upstreamErrors(): Promise<Record<string, number>> {
  const text = await (await fetch(h.daemon.ctx.metricsUrl as string)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^ob_proxy_upstream_errors_total\{instance="gpu-1",kind="(\w+)"\} (\d+)$/gm))
    out[m[1]!] = Number(m[2]);
  return out;
}

const failures = (): unknown[] => h.logs.filter((l) => l.msg === 'model server failed').map((l) => l.code);

it('an error event or a refused event is one upstream_error, in the log and the metrics', async () => {
  const modes = ['error-event', 'broken-error-event', 'named-error-event', 'named-event', 'html-frames'];
  for (const mode of modes) {
    const r = await post(h.baseUrl, key, chatBody(`go [[sim fail=${mode} failAfterChunks=2]]`, { stream: true }));
    expect({
      mode,
      status: r.status,
      errorEvents: errorEvents(r.text).length,
      done: r.text.includes('[DONE]'),
    }).toEqual({ mode, status: 200, errorEvents: 1, done: false });
  }
  // One failure per stream; the log line of each is written when its exchange ends.
  await eventually(() => failures().length >= modes.length, 'every failure logged');
  expect(failures()).toEqual(modes.map(() => 'upstream_error'));
  expect(await upstreamErrors()).toEqual({ upstream_error: modes.length });
});

it('a body kept open after [DONE] is aborted after the drain, and the whole stream counts as a success', async () => {
  const k = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!;
  const before = { ...k.usage };
  const logged = failures().length;
  const r = await post(h.baseUrl, key, chatBody('go [[sim fail=hang-after-done]]', { stream: true }));
  expect(r.status).toBe(200);
  expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(4));
  expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  // The exchange is settled, whichever way, before the model server sees its connection closed.
  await expectUpstreamAborted(sim);
  expect({
    errors: k.usage.errors - before.errors,
    completion: k.usage.completionTokens - before.completionTokens,
  }).toEqual({
    errors: 0,
    completion: 4,
  });
  expect(failures().slice(logged)).toEqual([]);
  expect(await upstreamErrors()).toEqual({ upstream_error: 5 });
});
