/**
 * Regression: a request waiting in its instance's queue (`--max-concurrency`) was not among the
 * work a revocation ends. Its key revoked, it kept its place until its turn came or the queue
 * timed it out: the client waited up to --queue-timeout and then got 429 rate_limited ("busy,
 * retry shortly", which the SDKs retry) instead of 401 revoked_api_key, and meanwhile its place
 * counted against the other keys' share of the queue. docs/contract.md §3 ends a revoked key's pending
 * requests within a second. A queued request is now ended with its key, like one sent upstream:
 * at once on the revocation (and by the in-flight sweep, for a pack end), out of the queue,
 * answered with the revocation's error, never sent to the model server.
 */
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { eventually } from '../helpers/processes.js';
import { type Harness, MODEL, post, readyInstance, startHarness, startSim } from '../reliability/harness.js';
import type { Simulator } from '../../simulator/simulator.js';

let h: Harness;
let sim: Simulator;
let key: string;

beforeAll(async () => {
  // A queue time-out shorter than the test's: a request that outlived its key's revocation gets
  // its 429 within the test, not a hang.
  h = await startHarness({ maxConcurrency: 1, queueTimeoutMs: 15_000 });
  const started = await startSim();
  sim = started.sim;
  key = await readyInstance(h, 'gpu-1', started.url);
});

afterAll(async () => {
  await h?.stop();
  await sim?.close();
});

const body = (tag: string): string => JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: tag }] });
const seen = (tag: string): boolean => sim.requests.some((r) => JSON.stringify(r.body).includes(tag));

it('a queued request of a revoked key leaves the queue at once with 401 revoked_api_key', async () => {
  const lc = h.daemon.ctx.lifecycle;
  const admission = h.daemon.ctx.admission;
  const other = await lc.createKey('gpu-1', 'waiting');
  // The instance's one slot, held by another key's stream.
  const leave = new AbortController();
  const first = await request(`${h.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: 'first [[sim chunks=100000 tokensPerSecond=20]]' }],
    }),
    signal: leave.signal,
  });
  expect(first.statusCode).toBe(200);
  first.body.on('error', () => {}).resume();

  const queued = post(h.baseUrl, other.secret, body('tag-queued'));
  await eventually(() => admission?.depth('gpu-1') === 1, 'the request queued');

  await lc.revokeKey(other.key.id);
  // The revocation's event has ended it before the command returned: its place is free.
  expect(admission?.depth('gpu-1')).toBe(0);
  const r = await queued;
  expect(r.status).toBe(401);
  expect(r.json).toEqual({
    error: {
      message:
        'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
      type: obError('revoked_api_key').type,
      code: 'revoked_api_key',
      param: null,
    },
  });
  expect(r.headers['x-request-id']).toMatch(/^req_/);

  // The slot-holder is untouched, and the revoked key's request never reaches the model server.
  const holder = [...lc.registry.keys.values()].find((k) => k.isDefault);
  expect(h.daemon.ctx.inflight.count(holder?.id ?? '')).toBe(1);
  expect(h.daemon.ctx.inflight.count(other.key.id)).toBe(0);
  leave.abort();
  expect(seen('tag-queued')).toBe(false);
});
