import type { StoreData } from '../src/store/store.js';

/** A store of `instances` ready instances, `keys` keys over them (a fifth revoked) and `events` audit events. */
export declare function bigStoreData(opts: { instances: number; keys: number; events: number; at?: string }): StoreData;
