/**
 * Regression: nothing bounded a response's total time. A model server that streams
 * well-formed events for ever, or never ends a plain body, held its request (and the client)
 * as long as it liked, the idle time-out never firing. A response now has a total deadline
 * (default 30 min, here 1.5 s): past it, 502 upstream_error, or mid-stream one upstream_error
 * event, and the upstream request is aborted.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { sseFrames, streamTokens } from '../reliability/harness.js';
import {
  type HostilePair,
  alongside,
  ask,
  errorEvents,
  expectUpstreamAborted,
  startHostilePair,
} from '../helpers/hostile-upstream.js';

const late = obError('upstream_error', {
  message: "The model server's answer took longer than 1.5 s; it was ended.",
}).toBody();

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair({ responseDeadlineMs: 1_500, idleTimeoutMs: 60_000 });
});
afterAll(async () => {
  await p.stop();
});

it('an endless stream of well-formed events: the tokens, then one upstream_error event, no [DONE]', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=endless-body tokensPerSecond=50]]', true));
  expect(r.status).toBe(200);
  expect(streamTokens(sseFrames(r.text)).length).toBeGreaterThan(0);
  expect(errorEvents(r.text)).toEqual([late]);
  expect(sseFrames(r.text).at(-1)).toBe(`data: ${JSON.stringify(late)}`);
  expect(r.text).not.toContain('[DONE]');
  await expectUpstreamAborted(p.hostile);
});

it('a plain answer whose body never ends: 502 upstream_error', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=hang-after-done]]', false));
  expect({ status: r.status, json: r.json }).toEqual({ status: 502, json: late });
  await expectUpstreamAborted(p.hostile);
});
