/**
 * daemon/stale-store-watch.ts alone: the flag the request path reads, set when the store has
 * been out of sync for longer than --max-stale and cleared when it is back, each change logged
 * once; nothing armed for a store this daemon alone writes. Fake timers, a clock the test moves.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StaleStoreWatch } from '../../daemon/stale-store-watch.js';
import { recordingLog } from '../helpers/recording-log.js';

const T0 = Date.parse('2026-11-23T12:00:00.000Z');

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
});
afterEach(() => {
  vi.useRealTimers();
});

function watch(lastInSync: (() => number) | undefined) {
  const clock = { ms: T0, now: (): number => clock.ms };
  const flag = { storeStale: false };
  const { log, lines } = recordingLog();
  const store = { location: 'postgres://db/ob', ...(lastInSync === undefined ? {} : { lastInSync }) };
  return { clock, flag, lines, w: new StaleStoreWatch({ store, clock, maxStaleMs: 5_000, flag, log }) };
}

describe('StaleStoreWatch', () => {
  it('stale past --max-stale, in sync again after: the flag follows, each change logged once', async () => {
    let synced = T0;
    const { clock, flag, lines, w } = watch(() => synced);
    w.start();
    clock.ms = T0 + 5_000;
    await vi.advanceTimersByTimeAsync(100);
    expect([flag.storeStale, lines]).toEqual([false, []]);
    clock.ms = T0 + 5_001;
    await vi.advanceTimersByTimeAsync(100);
    expect(flag.storeStale).toBe(true);
    clock.ms = T0 + 9_000;
    await vi.advanceTimersByTimeAsync(1_000);
    synced = clock.ms;
    await vi.advanceTimersByTimeAsync(100);
    expect(flag.storeStale).toBe(false);
    expect(lines).toEqual([
      {
        level: 'error',
        msg: 'out of sync with the store for longer than --max-stale: refusing every key with 503 store_unreachable until in sync again',
        obj: { store: 'postgres://db/ob', behindMs: 5_001, maxStaleMs: 5_000 },
      },
      { level: 'info', msg: 'in sync with the store again: serving keys', obj: { store: 'postgres://db/ob' } },
    ]);
  });

  it('checks every 100 ms from start() until stop(), and not before', async () => {
    const { clock, flag, w } = watch(() => T0);
    clock.ms = T0 + 60_000;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(flag.storeStale).toBe(false);
    w.start();
    await vi.advanceTimersByTimeAsync(99);
    expect(flag.storeStale).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(flag.storeStale).toBe(true);
    w.stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a store this daemon alone writes is never stale: nothing is armed', () => {
    const { flag, lines, w } = watch(undefined);
    w.start();
    expect(vi.getTimerCount()).toBe(0);
    w.check();
    expect([flag.storeStale, lines]).toEqual([false, []]);
  });
});
