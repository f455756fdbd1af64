import type { Mutation, Store } from '../../src/store/store.js';

/**
 * The store with each commit timed (ob_proxy_store_write_seconds). A proxy, so every other
 * member a store has (a shared store's subscribe, sync, …) reaches it unchanged.
 */
export function timedStore(inner: Store, observe: (seconds: number) => void): Store {
  const commit = async (mutations: readonly Mutation[]): Promise<void> => {
    const t0 = performance.now();
    try {
      await inner.commit(mutations);
    } finally {
      observe((performance.now() - t0) / 1000);
    }
  };
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'commit') return commit;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(target) : v;
    },
  });
}
