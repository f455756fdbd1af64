import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Keys from which a store's load is followed by a full collection. Loading parses the store and
 * copies its records (the store's tables, the registry's), and the heap V8 grew to for that stays
 * the process's RSS while the daemon idles: nothing it does afterwards allocates enough to make V8
 * collect the old generation again. At 100,000 keys the collection takes a fifth of a second and
 * returns a third of the RSS; below this many keys there is little to return.
 */
export const COLLECT_FROM_KEYS = 10_000;

/** A full, blocking collection of the heap. */
export type CollectGarbage = () => void;

/**
 * V8's own `gc`, as `--expose-gc` gives it, taken from a context of its own: the flag is set
 * for that context's creation only, so the daemon's global scope never has a `gc` function.
 */
export const collectGarbage: CollectGarbage = () => {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return exposed();
  setFlagsFromString('--expose-gc');
  try {
    (runInNewContext('gc') as () => void)();
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
};

/** After a load of `keys` keys: the load's garbage collected, before the daemon serves. */
export function collectLoadGarbage(keys: number, collect: CollectGarbage = collectGarbage): boolean {
  if (keys < COLLECT_FROM_KEYS) return false;
  collect();
  return true;
}
