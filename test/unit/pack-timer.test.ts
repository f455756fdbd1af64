/**
 * daemon/pack-timer.ts alone: one timer armed for the earliest pack end, nothing armed before
 * start() or after stop(), the 24.8-day cap, a chores-less daemon of a shared store looking again
 * every second, and the log lines. Time is Vitest's fake timers; the clock reads the fake Date.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PackTimer, endPacksEndedWhileDown } from '../../daemon/pack-timer.js';
import type { Instance } from '../../src/domain/instance.js';
import { recordingLog } from '../helpers/recording-log.js';

const T0 = Date.parse('2026-11-23T12:00:00.000Z');
const clock = { now: (): number => Date.now() };

/** Packs by end time; endDuePacks ends those due, as the lifecycle does. */
class Packs {
  ends = new Map<string, number>();
  calls: number[] = [];
  fail: Error | null = null;
  nextPackEnd(): number | null {
    return this.ends.size === 0 ? null : Math.min(...this.ends.values());
  }
  endDuePacks(): Promise<Instance[]> {
    this.calls.push(Date.now() - T0);
    if (this.fail !== null) return Promise.reject(this.fail);
    const ended = [...this.ends].filter(([, t]) => t <= Date.now()).map(([id]) => ({ id }) as Instance);
    for (const i of ended) this.ends.delete(i.id);
    return Promise.resolve(ended);
  }
}

function timer(holdsChores?: () => boolean) {
  const packs = new Packs();
  const { log, lines } = recordingLog();
  const store = holdsChores === undefined ? {} : { holdsChores };
  return { packs, lines, timer: new PackTimer({ lifecycle: packs, store, clock, log }) };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'], now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('PackTimer', () => {
  it('arms nothing before start(), then ends each pack just after its end and re-arms for the next', async () => {
    const { packs, lines, timer: t } = timer();
    packs.ends.set('a', T0 + 1_000);
    packs.ends.set('b', T0 + 3_000);
    t.schedule();
    expect(vi.getTimerCount()).toBe(0);
    t.start();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_004);
    expect(packs.calls).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(packs.calls).toEqual([1_005]);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(packs.calls).toEqual([1_005, 3_005]);
    expect(vi.getTimerCount()).toBe(0);
    expect(lines).toEqual([
      { level: 'info', msg: 'pack ended: instance stopped, keys revoked', obj: { instance: 'a' } },
      { level: 'info', msg: 'pack ended: instance stopped, keys revoked', obj: { instance: 'b' } },
    ]);
  });

  it('a pack changed meanwhile: schedule() re-arms for the new earliest end, one timer only', async () => {
    const { packs, timer: t } = timer();
    packs.ends.set('a', T0 + 10_000);
    t.start();
    packs.ends.set('b', T0 + 2_000);
    t.schedule();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(2_005);
    expect(packs.calls).toEqual([2_005]);
  });

  it('caps the wait at what setTimeout holds: a pack 60 days ahead is re-armed when the capped timer fires', async () => {
    const { packs, timer: t } = timer();
    packs.ends.set('far', T0 + 60 * 86_400_000);
    t.start();
    await vi.advanceTimersByTimeAsync(2 ** 31 - 2);
    expect(packs.calls).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(packs.calls).toEqual([2 ** 31 - 1]);
    expect(packs.ends.has('far')).toBe(true);
    expect(vi.getTimerCount()).toBe(1);
  });

  it('a daemon of a shared store without the chores looks again every second at a pack already due', async () => {
    const { packs, timer: t } = timer(() => false);
    packs.ends.set('due', T0);
    // The lifecycle leaves the pack to the daemon that holds the chores.
    packs.endDuePacks = function (): Promise<Instance[]> {
      this.calls.push(Date.now() - T0);
      return Promise.resolve([]);
    };
    t.start();
    await vi.advanceTimersByTimeAsync(3_000);
    expect(packs.calls).toEqual([1_000, 2_000, 3_000]);
  });

  it('a failed end is logged and the timer re-armed', async () => {
    const { packs, lines, timer: t } = timer();
    packs.ends.set('a', T0 + 100);
    packs.fail = new Error('store down');
    t.start();
    await vi.advanceTimersByTimeAsync(105);
    expect(lines).toEqual([{ level: 'error', msg: 'ending packs failed', obj: { err: packs.fail } }]);
    packs.fail = null;
    await vi.advanceTimersByTimeAsync(5);
    expect(packs.calls).toEqual([105, 110]);
    expect(lines.at(-1)).toEqual({
      level: 'info',
      msg: 'pack ended: instance stopped, keys revoked',
      obj: { instance: 'a' },
    });
  });

  it('stop(): nothing fires, schedule() arms nothing, and an end under way does not re-arm', async () => {
    const { packs, timer: t } = timer();
    packs.ends.set('a', T0 + 100);
    packs.ends.set('b', T0 + 200);
    t.start();
    let release!: () => void;
    const endDuePacks = packs.endDuePacks.bind(packs);
    packs.endDuePacks = () => new Promise((resolve) => (release = () => resolve(endDuePacks())));
    await vi.advanceTimersByTimeAsync(105);
    t.stop();
    release();
    await vi.advanceTimersByTimeAsync(1_000);
    t.schedule();
    expect(vi.getTimerCount()).toBe(0);
    expect(packs.ends.has('b')).toBe(true);
  });
});

describe('endPacksEndedWhileDown', () => {
  it('logs each pack that ran out while the daemon was down', async () => {
    const packs = new Packs();
    packs.ends.set('a', T0 - 1);
    packs.ends.set('b', T0 + 1);
    const { log, lines } = recordingLog();
    await endPacksEndedWhileDown(packs, log);
    expect(lines).toEqual([
      { level: 'info', msg: 'pack ended while the daemon was down: keys revoked', obj: { instance: 'a' } },
    ]);
  });

  it('a store that cannot be written does not keep the daemon down: logged, not thrown', async () => {
    const packs = new Packs();
    packs.fail = new Error('store down');
    const { log, lines } = recordingLog();
    await endPacksEndedWhileDown(packs, log);
    expect(lines).toEqual([
      {
        level: 'error',
        msg: 'ending packs that ran out while the daemon was down: not written yet',
        obj: { err: 'store down' },
      },
    ]);
  });
});
