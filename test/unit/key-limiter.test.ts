/**
 * Per-key rpm, tpm and concurrency (src/services/key-limiter.ts) with an injected clock: the exact
 * x-ratelimit-* headers OpenAI's SDKs read, and the waits they are told.
 */
import { describe, expect, it } from 'vitest';
import { type KeyLimits, type KeyRecord, noLimits } from '../../src/domain/key.js';
import {
  CONCURRENCY_RETRY_MS,
  KeyLimiter,
  UNCAPPED_RESERVE,
  formatReset,
  retryAfterSeconds,
} from '../../src/services/key-limiter.js';
import { headerRecord, viewVerdict } from '../helpers/header-list.js';

const T0 = 1_800_000_000_000;
const key = (limits: Partial<KeyLimits>, id = 'k1'): KeyRecord =>
  ({ id, limits: { ...noLimits(), ...limits } }) as KeyRecord;

describe('KeyLimiter', () => {
  it("writes a tail (the pack's headers) at the end of the key's one list, nothing allocated per request", () => {
    const l = new KeyLimiter(60_000);
    const tail = ['x-ob-pack-ends-at', '2026-12-01T12:00:00.000Z'];
    const soon = ['x-ob-pack-ends-at', '2026-12-01T12:00:00.000Z', 'x-ob-pack-ends-soon', 'true'];
    const k = key({ rpm: 2 });
    const first = l.admit(k, T0, tail).headers;
    expect([...first]).toEqual([
      'x-ratelimit-limit-requests',
      '2',
      'x-ratelimit-remaining-requests',
      '1',
      'x-ratelimit-reset-requests',
      '1m0s',
      ...tail,
    ]);
    // The same list again, its values set in place.
    expect(l.admit(k, T0 + 1, tail).headers).toBe(first);
    // A longer tail makes a new list; an answer under way keeps the one it was given.
    const second = l.admit(k, T0 + 2, soon).headers;
    expect(second).not.toBe(first);
    expect(headerRecord(second)).toMatchObject({ 'x-ob-pack-ends-soon': 'true' });
    expect([...l.admit(k, T0 + 3, null).headers]).toHaveLength(6);
    // A key with no x-ratelimit-* header: the tail itself.
    expect(l.admit(key({ concurrency: 1 }, 'k2'), T0, tail).headers).toBe(tail);
  });

  it('counts requests in a one-minute window and tells how long until it ends', () => {
    const l = new KeyLimiter(60_000);
    const k = key({ rpm: 2 });
    expect(viewVerdict(l.admit(k, T0))).toEqual({
      refused: null,
      retryAfterMs: 0,
      entered: true,
      report: false,
      headers: {
        'x-ratelimit-limit-requests': '2',
        'x-ratelimit-remaining-requests': '1',
        'x-ratelimit-reset-requests': '1m0s',
      },
    });
    expect(viewVerdict(l.admit(k, T0 + 1500)).headers).toEqual({
      'x-ratelimit-limit-requests': '2',
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': '58.5s',
    });
    expect(viewVerdict(l.admit(k, T0 + 59_980))).toEqual({
      refused: 'rpm',
      retryAfterMs: 20,
      entered: false,
      report: true,
      headers: {
        'x-ratelimit-limit-requests': '2',
        'x-ratelimit-remaining-requests': '0',
        'x-ratelimit-reset-requests': '20ms',
      },
    });
    // The window is over: a new one starts with this request.
    expect(viewVerdict(l.admit(k, T0 + 60_000))).toMatchObject({
      refused: null,
      headers: { 'x-ratelimit-remaining-requests': '1', 'x-ratelimit-reset-requests': '1m0s' },
    });
  });

  it('charges tokens when they are known; over its tpm, the next request is refused until the window ends and what was over is carried', () => {
    const l = new KeyLimiter(60_000);
    const k = key({ tpm: 100 });
    expect(viewVerdict(l.admit(k, T0)).headers).toEqual({
      'x-ratelimit-limit-tokens': '100',
      'x-ratelimit-remaining-tokens': '100',
      'x-ratelimit-reset-tokens': '0ms',
    });
    l.leave(k.id);
    l.chargeTokens(k.id, 60, T0 + 1000, 100);
    expect(viewVerdict(l.admit(k, T0 + 2000)).headers).toEqual({
      'x-ratelimit-limit-tokens': '100',
      'x-ratelimit-remaining-tokens': '40',
      'x-ratelimit-reset-tokens': '59s',
    });
    l.leave(k.id);
    // One answer may go past the limit (its size is known only at its end); the 30 over it are
    // carried into the next window, so the count is back to nothing only after that one.
    l.chargeTokens(k.id, 70, T0 + 3000, 100);
    expect(viewVerdict(l.admit(k, T0 + 4000))).toEqual({
      refused: 'tpm',
      retryAfterMs: 57_000,
      entered: false,
      report: true,
      headers: {
        'x-ratelimit-limit-tokens': '100',
        'x-ratelimit-remaining-tokens': '0',
        'x-ratelimit-reset-tokens': '1m57s',
      },
    });
    // Reported once per window, not once per refusal.
    expect(viewVerdict(l.admit(k, T0 + 5000))).toMatchObject({ refused: 'tpm', report: false });
    expect(viewVerdict(l.admit(k, T0 + 61_000))).toMatchObject({
      refused: null,
      headers: { 'x-ratelimit-remaining-tokens': '70', 'x-ratelimit-reset-tokens': '1m0s' },
    });
    l.leave(k.id);
    expect(viewVerdict(l.admit(k, T0 + 121_000))).toMatchObject({
      refused: null,
      headers: { 'x-ratelimit-remaining-tokens': '100' },
    });
  });

  it('carries tokens over the tpm into the next windows, one tpm paid off per window', () => {
    const l = new KeyLimiter(60_000);
    const k = key({ tpm: 100 });
    l.admit(k, T0);
    l.leave(k.id);
    // Answers admitted together, charged at their ends: 3.5 windows' worth.
    l.chargeTokens(k.id, 350, T0 + 1000, 100);
    expect(viewVerdict(l.admit(k, T0 + 1000))).toMatchObject({ refused: 'tpm', retryAfterMs: 3 * 60_000 });
    expect(viewVerdict(l.admit(k, T0 + 61_000))).toMatchObject({ refused: 'tpm', retryAfterMs: 2 * 60_000 });
    // Windows with no request pay off as much.
    expect(viewVerdict(l.admit(k, T0 + 181_000 - 1))).toMatchObject({ refused: 'tpm', retryAfterMs: 1 });
    expect(viewVerdict(l.admit(k, T0 + 181_000))).toMatchObject({
      refused: null,
      headers: { 'x-ratelimit-remaining-tokens': '50', 'x-ratelimit-reset-tokens': '1m0s' },
    });
  });

  it("reserves each answer's prompt estimate and cap against the tpm, refuses at the tpm, and settles to the real usage", () => {
    const l = new KeyLimiter(60_000);
    const k = key({ tpm: 100 });
    // Capped answers reserve their prompt and cap: admitted while the key is under its tpm.
    const a = l.reserve(k, 20, 10, T0);
    expect([a.refused, a.tokens, headerRecord(a.headers)['x-ratelimit-remaining-tokens']]).toEqual([false, 30, '70']);
    expect([l.reserve(k, 20, 10, T0).tokens, l.reserve(k, 20, 10, T0).tokens, l.reserve(k, 20, 10, T0).tokens]).toEqual(
      [30, 30, 30],
    );
    // 120 reserved: refused, with a short wait (the answers under way give back what they do not use).
    const refused = l.reserve(k, 20, 10, T0);
    expect([refused.refused, refused.tokens, refused.retryAfterMs]).toEqual([true, 0, CONCURRENCY_RETRY_MS]);
    expect(viewVerdict(l.admit(k, T0))).toMatchObject({ refused: 'tpm', retryAfterMs: CONCURRENCY_RETRY_MS });
    // Two answers end, using 25 each: their reservations go, their usage is charged.
    for (let i = 0; i < 2; i++) {
      l.release('k1', 30);
      l.chargeTokens('k1', 25, T0 + 10, 100);
    }
    // 50 charged + 60 reserved: still refused; one more ends with 5, and there is room for one.
    expect(l.reserve(k, 20, 10, T0 + 20).refused).toBe(true);
    l.release('k1', 30);
    l.chargeTokens('k1', 5, T0 + 20, 100);
    expect(l.reserve(k, 20, 10, T0 + 20)).toMatchObject({ refused: false, tokens: 30 });
    // Charged past the tpm: the wait is the window's, as before reservations.
    l.chargeTokens('k1', 100, T0 + 30, 100);
    expect(l.reserve(k, 20, 10, T0 + 30)).toMatchObject({ refused: true, retryAfterMs: 60_000 - 20 });
  });

  it('an answer without a cap reserves a long answer, within what is left of the tpm; a key without a tpm reserves nothing', () => {
    const l = new KeyLimiter(60_000);
    expect(l.reserve(key({ tpm: 100_000 }), 50, null, T0).tokens).toBe(50 + UNCAPPED_RESERVE);
    expect(l.reserve(key({ tpm: 100 }, 'small'), 30, null, T0).tokens).toBe(100);
    // A prompt estimate alone past what is left: the prompt, and no completion.
    expect(l.reserve(key({ tpm: 10 }, 'tiny'), 30, null, T0).tokens).toBe(30);
    expect(l.reserve(key({ rpm: 5 }, 'none'), 30, null, T0)).toMatchObject({ refused: false, tokens: 0 });
    // Released more than once, or for a key forgotten: nothing goes below zero.
    l.release('small', 100);
    l.release('small', 100);
    l.forget('tiny');
    l.release('tiny', 30);
    expect(l.reserve(key({ tpm: 100 }, 'small'), 30, 5, T0).tokens).toBe(35);
  });

  it('holds a key to its concurrency; no x-ratelimit header is about it', () => {
    const l = new KeyLimiter(60_000);
    const k = key({ concurrency: 2 });
    expect(viewVerdict(l.admit(k, T0))).toEqual({
      refused: null,
      retryAfterMs: 0,
      entered: true,
      report: false,
      headers: {},
    });
    expect(l.admit(k, T0).refused).toBeNull();
    expect(viewVerdict(l.admit(k, T0))).toEqual({
      refused: 'concurrency',
      retryAfterMs: 1000,
      entered: false,
      report: true,
      headers: {},
    });
    expect(l.inflight(k.id)).toBe(2);
    l.leave(k.id);
    expect(l.admit(k, T0).refused).toBeNull();
  });

  it('keeps keys apart, and a limit changed on the record applies to the next request', () => {
    const l = new KeyLimiter(60_000);
    const a = key({ rpm: 1 }, 'a');
    const b = key({ rpm: 1 }, 'b');
    expect(l.admit(a, T0).refused).toBeNull();
    expect(l.admit(a, T0).refused).toBe('rpm');
    expect(l.admit(b, T0).refused).toBeNull();
    a.limits = { ...a.limits, rpm: 5 };
    expect(viewVerdict(l.admit(a, T0 + 10)).headers).toMatchObject({
      'x-ratelimit-limit-requests': '5',
      'x-ratelimit-remaining-requests': '3',
    });
  });

  it("keeps one header list per key: an answer carries the key's latest counts, and a change of limits gets a new list with the headers it needs", () => {
    const l = new KeyLimiter(60_000);
    const k = key({ rpm: 10 });
    const first = l.admit(k, T0).headers;
    expect(headerRecord(first)['x-ratelimit-remaining-requests']).toBe('9');
    // A second request while the first is still being answered: the first's answer tells 8 left.
    expect(l.admit(k, T0 + 1000).headers).toBe(first);
    expect(headerRecord(first)).toEqual({
      'x-ratelimit-limit-requests': '10',
      'x-ratelimit-remaining-requests': '8',
      'x-ratelimit-reset-requests': '59s',
    });
    k.limits = { ...k.limits, tpm: 500 };
    const both = l.admit(k, T0 + 2000).headers;
    expect(both).not.toBe(first);
    expect(Object.entries(headerRecord(both))).toEqual([
      ['x-ratelimit-limit-requests', '10'],
      ['x-ratelimit-remaining-requests', '7'],
      ['x-ratelimit-reset-requests', '58s'],
      ['x-ratelimit-limit-tokens', '500'],
      ['x-ratelimit-remaining-tokens', '500'],
      ['x-ratelimit-reset-tokens', '0ms'],
    ]);
    // The answer begun before the change keeps what it had: no header of a limit it was not under.
    expect(first).toHaveLength(6);
    k.limits = { ...k.limits, rpm: null };
    expect(Object.keys(headerRecord(l.admit(k, T0 + 3000).headers))).toEqual([
      'x-ratelimit-limit-tokens',
      'x-ratelimit-remaining-tokens',
      'x-ratelimit-reset-tokens',
    ]);
    k.limits = { ...k.limits, tpm: null, concurrency: 1 };
    expect(viewVerdict(l.admit(k, T0 + 4000)).headers).toEqual({});
  });

  it('writes resets as OpenAI does, and Retry-After in whole seconds, at least 1', () => {
    expect([0, 20, 999, 1000, 8640, 59_999, 60_000, 360_000, 90_500].map(formatReset)).toEqual([
      '0ms',
      '20ms',
      '999ms',
      '1s',
      '8.64s',
      '59.999s',
      '1m0s',
      '6m0s',
      '1m30.5s',
    ]);
    expect([0, 1, 1000, 1001, 57_000].map(retryAfterSeconds)).toEqual([1, 1, 1, 2, 57]);
  });

  it('formats every reset up to 7 minutes as the toFixed formula it replaced did', () => {
    const byToFixed = (ms: number): string => {
      const whole = Math.ceil(ms);
      if (whole < 1000) return `${whole}ms`;
      const minutes = Math.floor(whole / 60_000);
      const seconds = Number(((whole - minutes * 60_000) / 1000).toFixed(3));
      return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
    };
    const differ: number[] = [];
    for (let ms = 0; ms <= 420_000; ms += 1)
      if (formatReset(ms) !== byToFixed(ms) || formatReset(ms - 0.5) !== byToFixed(ms - 0.5)) differ.push(ms);
    expect(differ).toEqual([]);
  });

  it('reports the reset of the moment it is asked, also within one millisecond and after a window ends', () => {
    const l = new KeyLimiter(60_000);
    const k = key({ rpm: 100 });
    expect(viewVerdict(l.admit(k, T0)).headers['x-ratelimit-reset-requests']).toBe('1m0s');
    expect(viewVerdict(l.admit(k, T0 + 0.4)).headers['x-ratelimit-reset-requests']).toBe('1m0s');
    expect(viewVerdict(l.admit(k, T0 + 1)).headers['x-ratelimit-reset-requests']).toBe('59.999s');
    expect(viewVerdict(l.admit(k, T0 + 59_990)).headers['x-ratelimit-reset-requests']).toBe('10ms');
    expect(viewVerdict(l.admit(k, T0 + 60_000)).headers).toMatchObject({
      'x-ratelimit-reset-requests': '1m0s',
      'x-ratelimit-remaining-requests': '99',
    });
  });
});
