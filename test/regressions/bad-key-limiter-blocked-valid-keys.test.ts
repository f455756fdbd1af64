/**
 * Regression (security): the bad-key limiter ran before authentication, so once an
 * address had sent too many bad keys, every request from it got 429, valid keys included: one
 * misconfigured client behind a NAT locked out everyone sharing the address. Now a valid key is
 * authenticated first and never counted or refused; only bad keys from that address get 429.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import type { Simulator } from '../../simulator/simulator.js';
import { type Harness, chatBody, post, readyInstance, startHarness, startSim } from '../reliability/harness.js';

let h: Harness;
let sim: Simulator;
let key: string;
beforeAll(async () => {
  h = await startHarness({ badKeyLimit: 3 });
  const s = await startSim();
  sim = s.sim;
  key = await readyInstance(h, 'nat', s.url);
});
afterAll(async () => {
  await h.stop();
  await sim.close();
});

it('a valid key from an address that is being limited is served', async () => {
  const bad = `${key.slice(0, -8)}AAAAAAAA`;
  for (let i = 0; i < 3; i++) expect((await post(h.baseUrl, bad, chatBody('x'))).status).toBe(401);
  expect((await post(h.baseUrl, bad, chatBody('x'))).json).toEqual(obError('rate_limited').toBody());
  const ok = await post(h.baseUrl, key, chatBody('valid'));
  expect(ok.status).toBe(200);
  expect(sim.requests.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);
  // The bad key is still limited afterwards: the valid request did not reset the window.
  expect((await post(h.baseUrl, bad, chatBody('x'))).status).toBe(429);
});
