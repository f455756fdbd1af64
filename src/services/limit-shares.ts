/**
 * How daemons sharing one store split what is left of a key's limit (docs/scale-out.md, "Limits
 * across daemons"). Every daemon reads the same snapshot of everyone's counts, so every daemon
 * computes the same split: whole units, in proportion to the weights, the remainder by largest
 * fraction (ties to the lower index). The shares add up to exactly `free`, which is what keeps the
 * cluster's total within the limit without asking the database per request.
 */
export function shareOf(free: number, weights: readonly number[], self: number): number {
  if (free <= 0) return 0;
  let total = 0;
  for (const w of weights) total += w;
  if (total <= 0) return 0;
  const base = (i: number): number => Math.floor((free * weights[i]!) / total);
  // The fraction each share lost to the floor, as an integer over `total` (exact, no rounding).
  const lost = (i: number): number => free * weights[i]! - base(i) * total;
  let given = 0;
  for (let i = 0; i < weights.length; i++) given += base(i);
  const left = free - given;
  const mine = lost(self);
  // Rank of this daemon among those that lost more (or as much, with a lower index).
  let ahead = 0;
  for (let i = 0; i < weights.length; i++) {
    const l = lost(i);
    if (l > mine || (l === mine && i < self)) ahead++;
  }
  return base(self) + (ahead < left ? 1 : 0);
}
