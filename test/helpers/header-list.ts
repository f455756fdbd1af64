import type { HeaderList } from '../../src/services/key-limiter.js';

/** A header list (names and values in turn) as an object, in its order, for whole-value assertions. */
export function headerRecord(list: HeaderList): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) out[list[i] as string] = list[i + 1] as string;
  return out;
}

/** `KeyLimiter.admit`'s verdict with its headers as an object. */
export function viewVerdict<V extends { headers: HeaderList }>(
  v: V,
): Omit<V, 'headers'> & { headers: Record<string, string> } {
  return { ...v, headers: headerRecord(v.headers) };
}
