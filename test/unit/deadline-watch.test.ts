import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { DEADLINE_TICK_MS, DeadlineWatch, type Expirable } from '../../daemon/data-plane/deadlines.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

function relay(inMs: number, log: string[], name: string): Expirable {
  return { deadlineAt: performance.now() + inMs, expire: () => log.push(`${name}@${performance.now()}`) };
}

it('expires each relay once, on the first tick at or past its deadline, and never one deleted', () => {
  const watch = new DeadlineWatch();
  const log: string[] = [];
  const a = relay(600, log, 'a');
  const b = relay(100, log, 'b');
  const gone = relay(100, log, 'gone');
  watch.add(a);
  watch.add(b);
  watch.add(gone);
  watch.delete(gone);
  vi.advanceTimersByTime(DEADLINE_TICK_MS);
  expect(log).toEqual([`b@${DEADLINE_TICK_MS}`]);
  vi.advanceTimersByTime(4 * DEADLINE_TICK_MS);
  // a's deadline (600 ms) is met on the tick at 750 ms: late by less than one tick.
  expect(log).toEqual([`b@${DEADLINE_TICK_MS}`, `a@${3 * DEADLINE_TICK_MS}`]);
  expect(watch.size).toBe(0);
});

it('a deadline moved later (the drain after [DONE]) is judged by its new value', () => {
  const watch = new DeadlineWatch();
  const log: string[] = [];
  const r = relay(100, log, 'r');
  watch.add(r);
  r.deadlineAt = performance.now() + 1_000;
  vi.advanceTimersByTime(3 * DEADLINE_TICK_MS);
  expect(log).toEqual([]);
  vi.advanceTimersByTime(2 * DEADLINE_TICK_MS);
  expect(log).toEqual([`r@${4 * DEADLINE_TICK_MS}`]);
});

it('runs one timer while there is something to watch, and stops when there is not', () => {
  const watch = new DeadlineWatch();
  const log: string[] = [];
  expect(vi.getTimerCount()).toBe(0);
  watch.add(relay(60_000, log, 'x'));
  watch.add(relay(60_000, log, 'y'));
  expect(vi.getTimerCount()).toBe(1);
  vi.advanceTimersByTime(61_000);
  expect(log.length).toBe(2);
  // The tick that finds the watch empty stops the timer; the next add starts it again.
  vi.advanceTimersByTime(DEADLINE_TICK_MS);
  expect(vi.getTimerCount()).toBe(0);
  watch.add(relay(100, log, 'z'));
  expect(vi.getTimerCount()).toBe(1);
  vi.advanceTimersByTime(DEADLINE_TICK_MS);
  expect(log.at(-1)).toBe(`z@${61_000 + 2 * DEADLINE_TICK_MS}`);
});
