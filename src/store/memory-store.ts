import { obError } from '../errors.js';
import type { AuditEvent } from '../domain/key.js';
import { cloneData } from './clone-data.js';
import type { UsageBucket } from '../domain/usage-buckets.js';
import {
  type AuditQuery,
  type BucketQuery,
  Tables,
  emptyData,
  type Mutation,
  type Store,
  type StoreData,
} from './store.js';

/** For unit tests: same semantics as the file store, and a switch to make writes fail. */
export class MemoryStore implements Store {
  readonly location = 'memory';
  failWrites = false;
  private tables: Tables;

  constructor(data: StoreData = emptyData()) {
    this.tables = Tables.from(structuredClone(data));
  }

  async load(): Promise<StoreData> {
    return cloneData(this.tables.toData());
  }

  async commit(mutations: readonly Mutation[]): Promise<void> {
    if (this.failWrites) throw obError('store_write_failed');
    for (const m of mutations) this.tables.apply(m);
  }

  async auditEvents(q: AuditQuery): Promise<readonly Readonly<AuditEvent>[]> {
    return this.tables.auditEvents(q);
  }

  async usageBuckets(q: BucketQuery): Promise<UsageBucket[]> {
    return this.tables.bucketsIn(q);
  }

  async close(): Promise<void> {}
}
