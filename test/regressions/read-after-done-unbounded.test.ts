/**
 * Regression: after `[DONE]` the proxy kept reading a model server that never ended
 * its body (40 s, until the upstream stopped; with the default idle time-out, five minutes), so
 * the request held its upstream connection and its slot. Now the rest of the body is drained
 * only briefly (a few KiB, a second), for the connection's reuse, then the request is aborted.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { expectedTokens, sseFrames, streamTokens } from '../reliability/harness.js';
import {
  type HostilePair,
  alongside,
  ask,
  expectUpstreamAborted,
  startHostilePair,
} from '../helpers/hostile-upstream.js';

let p: HostilePair;
beforeAll(async () => {
  // A long idle time-out, as in production: only the drain bound can end the request soon.
  p = await startHostilePair({ idleTimeoutMs: 120_000, upstreamTimeoutMs: 120_000 });
});
afterAll(async () => {
  await p.stop();
});

it('the relay stops at [DONE]', () => {
  const relay = new SseRelay('chatcmpl-x', false);
  expect(relay.push(Buffer.from('data: [DONE]\n\ndata: {"id":"a"}\n\n'))).toBe('data: [DONE]\n\n');
  expect(relay.done).toBe(true);
});

it('the client gets the whole stream, and the upstream request is aborted soon after [DONE]', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=hang-after-done]]', true));
  expect(r.status).toBe(200);
  expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(4));
  expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  // Well within the 120 s idle time-out (eventually gives it 10 s).
  await expectUpstreamAborted(p.hostile);
});
