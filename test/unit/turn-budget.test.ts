import { expect, it } from 'vitest';
import { SLICE_MS, TurnBudget } from '../../daemon/turn-budget.js';

it('asks for a turn after its count of steps, or once SLICE_MS have passed, whichever is first', async () => {
  const clock = { ms: 0 };
  const budget = new TurnBudget(100, () => clock.ms);
  let steps = 0;
  while (!budget.spent()) steps++;
  expect(steps).toBe(99);
  await budget.pause();

  // Slow steps (code run for the first time): the clock ends the piece long before the count.
  steps = 0;
  while (!budget.spent()) {
    steps++;
    clock.ms += 1;
  }
  expect(steps).toBeLessThan(100);
  expect(steps).toBeGreaterThanOrEqual(SLICE_MS);
  await budget.pause();

  // Steps counted in bulk (a sort of n items: n log n comparisons) end a piece as well.
  expect(budget.spent(40)).toBe(false);
  expect(budget.spent(60)).toBe(true);
});
