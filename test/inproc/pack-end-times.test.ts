/**
 * Pack end times: impossible dates refused, far ends armed without overflow. One describe per
 * defect found, its story above it.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { validateTimestamp } from '../../src/domain/validate.js';
import { type Harness, MODEL, startHarness } from '../reliability/harness.js';

/**
 * Regression (fuzzing): `--pack-ends 2030-02-30T00:00:00Z` was accepted and silently
 * became 2030-03-02, because Date.parse rolls impossible days over. A pack end is money: a date
 * that does not exist is now refused with the usual sentence.
 */
describe('impossible dates are refused', () => {
  it('days that do not exist, and zones out of range, are refused', () => {
    for (const v of [
      '2030-02-30T00:00:00Z',
      '2030-02-29T00:00:00Z',
      '2030-04-31T12:00:00Z',
      '2030-01-01T00:00:00+24:00',
      '2030-01-01T00:00:00+05:60',
    ]) {
      expect(() => validateTimestamp(v, 'packEndsAt'), v).toThrow(
        'packEndsAt must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.',
      );
    }
  });

  it('real dates, leap days and offsets still pass, normalised to UTC', () => {
    expect(validateTimestamp('2028-02-29T10:00:00Z', 'p')).toBe('2028-02-29T10:00:00.000Z');
    expect(validateTimestamp('2030-12-31T23:30:00-01:00', 'p')).toBe('2031-01-01T00:30:00.000Z');
    expect(validateTimestamp('2030-06-30T08:00+02:00', 'p')).toBe('2030-06-30T06:00:00.000Z');
  });
});

/**
 * Regression (fuzzing): a pack ending more than 24.8 days ahead armed the pack timer
 * with more than 2^31-1 ms; Node fires such a timer after 1 ms, so the daemon ran endDuePacks
 * (and took the lifecycle mutex) about a thousand times a second for as long as it lived.
 */
describe('a pack end past 24.8 days arms no busy timer', () => {
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
});
