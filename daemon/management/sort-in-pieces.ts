import { nextTurn } from '../turn-budget.js';
import { STREAM_PAGE } from './list-pages.js';

/**
 * Comparisons made between two turns of the event loop: a few times a page, as the comparisons of
 * a report's order (ICU's localeCompare) cost about what writing a record does.
 */
const COMPARISONS_A_TURN = STREAM_PAGE * 4;

/**
 * `items` sorted by `compare`, a stable merge sort that waits a turn of the event loop every
 * COMPARISONS_A_TURN comparisons or moves. Stable, as Array.prototype.sort is: for the same
 * comparator both give the same order, so a report sorted here is the one sorted at once.
 */
export async function sortInPieces<T>(items: readonly T[], compare: (a: T, b: T) => number): Promise<T[]> {
  const n = items.length;
  let from = items.slice();
  let to = new Array<T>(n);
  let work = 0;
  for (let width = 1; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let o = lo;
      // Runs already in order (a list mostly sorted) are copied with one comparison.
      if (j < hi && compare(from[j - 1]!, from[j]!) > 0) {
        while (i < mid && j < hi) {
          to[o++] = compare(from[j]!, from[i]!) < 0 ? from[j++]! : from[i++]!;
          if (++work >= COMPARISONS_A_TURN) {
            work = 0;
            await nextTurn();
          }
        }
      }
      while (i < mid) to[o++] = from[i++]!;
      while (j < hi) to[o++] = from[j++]!;
      // The comparison of the runs' ends, and the moves (cheap: one per sixteen).
      work += 1 + ((hi - lo) >>> 4);
      if (work >= COMPARISONS_A_TURN) {
        work = 0;
        await nextTurn();
      }
    }
    [from, to] = [to, from];
  }
  return from;
}
