/**
 * Regression (SIGTERM drain): server.close() waited for keep-alive connections that
 * went idle during the drain (their last stream ended) until their 65 s keep-alive time-out, so
 * the grace period always ran out and a stop with streams in flight took the whole grace period,
 * then force-closed. Now idle connections are closed as soon as they are idle.
 */
import { Agent, request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Harness, chatBody, eventually, readyInstance, startHarness, startSim } from '../reliability/harness.js';

let h: Harness;
let sim: Simulator;
let key: string;
beforeAll(async () => {
  h = await startHarness();
  const s = await startSim();
  sim = s.sim;
  key = await readyInstance(h, 'drain', s.url);
});
afterAll(() => sim.close());

it('a drain with keep-alive clients ends when their streams end, not when the grace period does', async () => {
  const agent = new Agent({ keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
  const streams = Array.from({ length: 5 }, async () => {
    const r = await request(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('[[sim tokensPerSecond=20 chunks=10]]', { stream: true })),
    });
    return r.body.text();
  });
  await eventually(() => sim.stats.inFlight === 5, 'streams under way');
  // A grace period far longer than this test's time-out: the bug made shutdown wait all of it.
  await h.daemon.shutdown(120_000);
  for (const text of await Promise.all(streams)) expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  expect(h.logs.some((l) => l.msg === 'grace period over: closing remaining connections')).toBe(false);
  await agent.close();
}, 20_000);
