/**
 * Regression (fuzzing): a pack ending more than 24.8 days ahead armed the pack timer
 * with more than 2^31-1 ms; Node fires such a timer after 1 ms, so the daemon ran endDuePacks
 * (and took the lifecycle mutex) about a thousand times a second for as long as it lived.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { type Harness, MODEL, startHarness } from '../reliability/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.stop());

it('a pack that ends in 60 days arms a timer Node can hold', async () => {
  const packEndsAt = new Date(Date.now() + 60 * 86_400_000).toISOString();
  const spy = vi.spyOn(globalThis, 'setTimeout');
  try {
    // The daemon's subscription to the lifecycle re-arms the timer (daemon/lifecycle-follow.ts).
    await h.daemon.ctx.lifecycle.addInstance({
      id: 'long-pack',
      model: MODEL,
      endpoint: 'http://127.0.0.1:9',
      packEndsAt,
    });
    const delays = spy.mock.calls.map((c) => c[1] ?? 0);
    expect(delays.length).toBeGreaterThan(0);
    expect(Math.max(...delays)).toBeLessThanOrEqual(2 ** 31 - 1);
    expect(Math.max(...delays)).toBeGreaterThan(20 * 86_400_000);
  } finally {
    spy.mockRestore();
  }
});
