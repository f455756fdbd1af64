import type { KeyRecord } from '../domain/key.js';
import type { UsageByRoute } from '../domain/route-usage.js';
import type { StoreData } from './store.js';

/**
 * A key record's own copy: its objects new (a registry changes usage and limits in place), its
 * strings shared, as strings never change. structuredClone copied every string too, and took a
 * second of a start at 100,000 keys (twice, with the garbage of both).
 */
export function cloneKey(k: KeyRecord): KeyRecord {
  return { ...k, usage: { ...k.usage, byRoute: cloneByRoute(k.usage.byRoute) }, limits: { ...k.limits } };
}

function cloneByRoute(byRoute: UsageByRoute | undefined): UsageByRoute {
  const out: UsageByRoute = {};
  if (byRoute === undefined) return out;
  for (const route of Object.keys(byRoute)) out[route] = { ...byRoute[route]! };
  return out;
}

/** A store's data with records of its own (keys as cloneKey; the rest, far fewer, by structuredClone). */
export function cloneData(data: StoreData): StoreData {
  const { keys, ...rest } = data;
  return { ...structuredClone(rest), keys: keys.map(cloneKey) };
}
