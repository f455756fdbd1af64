/** The large store of a long-lived daemon: one generator, shared with the bench (bench/big-store.mjs). */
export { bigStoreData } from '../../bench/big-store.mjs';
