/**
 * The limiter of requests with bad keys: per address block, after authentication. One describe
 * per defect found, its story above it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadKeyLimiter } from '../../daemon/data-plane/bad-key-limiter.js';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { buildInproc, type Inproc } from '../helpers/inproc.js';
import { chatBody, type Harness, post, readyInstance, startHarness, startSim } from '../reliability/harness.js';

/**
 * Regression (security): the bad-key limiter ran before authentication, so once an
 * address had sent too many bad keys, every request from it got 429, valid keys included: one
 * misconfigured client behind a NAT locked out everyone sharing the address. Now a valid key is
 * authenticated first and never counted or refused; only bad keys from that address get 429.
 */
describe('the bad-key limiter never counts or refuses a valid key', () => {
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
});

/**
 * Regression: the bad-key limiter counted each address on its own and kept every address it saw
 * for its minute. An IPv6 host, which is given a whole /64, guessed without ever being slowed by
 * sending each guess from a new address of it; and the windows were dropped only by a scan of all
 * of them, run for every new address once 10,000 were live, with no bound on how many: a guesser
 * with many addresses made memory grow with every one and each of its requests walk them all
 * (measured: 215 µs per refused request below 10,000 addresses, 400 µs at 20,000, and growing).
 * Now an IPv6 /64 is one client (an IPv4 address, also as a dual-stack listener writes it, still
 * counts alone); windows are kept in the order they started, ended ones dropped from the front as
 * new ones come, and at most a fixed number of clients is tracked (the oldest dropped first).
 */
describe('the bad-key limiter counts an IPv6 /64 as one client, in bounded time', () => {
  let d: Inproc;

  beforeAll(async () => {
    d = await buildInproc({ badKeyLimit: 3 });
  });

  afterAll(async () => {
    await d?.close();
  });

  /** A bad key from `remoteAddress`: the status and code of the answer. */
  async function guess(remoteAddress: string): Promise<[number, string]> {
    const r = await d.daemon.dataPlane.inject({
      method: 'GET',
      url: '/v1/models',
      headers: { authorization: 'Bearer ob_sk_guessed' },
      remoteAddress,
    });
    return [r.statusCode, (JSON.parse(r.body) as { error: { code: string } }).error.code];
  }

  const REFUSED: [number, string] = [401, 'invalid_api_key'];
  const BLOCKED: [number, string] = [429, 'rate_limited'];

  it('an IPv6 host guessing from a new address of its /64 each time is one client', async () => {
    for (const a of ['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2:aaaa::3'])
      expect(await guess(a)).toEqual(REFUSED);
    expect(await guess('2001:db8:1:2:ffff:ffff:ffff:ffff')).toEqual(BLOCKED);
    expect(await guess('2001:0DB8:0001:0002:0000:0000:0000:0077')).toEqual(BLOCKED);
    // Its neighbours in another /64 are not held back by it.
    expect(await guess('2001:db8:1:3::1')).toEqual(REFUSED);

    // IPv4 clients of a dual-stack listener are not one /64: each address counts alone.
    for (let i = 0; i < 3; i++) expect(await guess('::ffff:192.0.2.1')).toEqual(REFUSED);
    expect(await guess('::ffff:192.0.2.1')).toEqual(BLOCKED);
    expect(await guess('::ffff:192.0.2.2')).toEqual(REFUSED);

    expect(
      d.logs.filter((l) => String(l.msg).startsWith('too many invalid keys')).map((l) => [l.level, l.address]),
    ).toEqual([
      [40, '2001:db8:1:2::/64'],
      [40, '192.0.2.1'],
    ]);
  });

  it('windows that ended are dropped as new ones come, and the clients tracked are bounded', async () => {
    const limiter = new BadKeyLimiter(3);
    d.daemon.ctx.badKeys = limiter;
    for (let i = 0; i < 300; i++) await guess(`10.0.${i >> 8}.${i & 255}`);
    expect(limiter.size).toBe(300);
    d.clock.advance(60_000);
    expect(await guess('10.1.0.0')).toEqual(REFUSED);
    expect(limiter.size).toBe(1);

    // Past its bound, the oldest client's window goes first.
    const bounded = new BadKeyLimiter(3, 60_000, 100);
    d.daemon.ctx.badKeys = bounded;
    for (let i = 0; i < 300; i++) await guess(`10.2.${i >> 8}.${i & 255}`);
    expect(bounded.size).toBe(100);
    for (let i = 0; i < 2; i++) expect(await guess('10.2.1.43')).toEqual(REFUSED);
    expect(await guess('10.2.1.43')).toEqual(BLOCKED);
  });
});
