import type { Mutation, Store, StoreData } from '../../src/store/store.js';

/** The store with each commit timed (ob_proxy_store_write_seconds); everything else passed on. */
export function timedStore(inner: Store, observe: (seconds: number) => void): Store {
  const timed: Store = {
    get location() {
      return inner.location;
    },
    load: (): Promise<StoreData> => inner.load(),
    close: (): Promise<void> => inner.close(),
    async commit(mutations: readonly Mutation[]): Promise<void> {
      const t0 = performance.now();
      try {
        await inner.commit(mutations);
      } finally {
        observe((performance.now() - t0) / 1000);
      }
    },
  };
  if (inner.isRevocationDurable !== undefined) timed.isRevocationDurable = (keyId) => inner.isRevocationDurable?.(keyId) === true;
  return timed;
}
