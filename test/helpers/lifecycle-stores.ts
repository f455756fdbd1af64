/**
 * What the store tests of one feature stand on: lifecycles opened on stores that are closed after
 * each test, fresh PostgreSQL databases dropped after it, and the two durable stores, the file
 * and PostgreSQL, for a `describe.each` that runs the same story on both.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { type LifecycleDeps, LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore, type FileStoreOptions } from '../../src/store/file-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { type TestDatabase, freshDatabase } from './postgres.js';

/** Makes a store's place (a folder, a database) and gives what opens a store there, again after a restart. */
export type StoreFactory = () => Promise<() => Store>;

export interface LifecycleStores {
  /** Every store opened so far in the test, the latest last. */
  readonly opened: Store[];
  /** A lifecycle on `store` (the test's clock; `models` or the test's allowed models). */
  open(store: Store, models?: readonly string[]): Promise<LifecycleService>;
  database(): Promise<TestDatabase>;
  /** The file store, in a fresh folder `<tmp>/<prefix>…`, and PostgreSQL, on a fresh database. */
  durable(prefix: string, file?: FileStoreOptions): [string, StoreFactory][];
}

export function useLifecycleStores(opts: {
  clock: LifecycleDeps['clock'];
  models: readonly string[];
}): LifecycleStores {
  const opened: Store[] = [];
  const databases: TestDatabase[] = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => {});
    for (const db of databases.splice(0)) await db.drop();
  });
  const database = async (): Promise<TestDatabase> => {
    const db = await freshDatabase();
    databases.push(db);
    return db;
  };
  return {
    opened,
    open: (store, models = opts.models) => {
      opened.push(store);
      return LifecycleService.open({ store, clock: opts.clock, secrets: cryptoSecretSource, models });
    },
    database,
    durable: (prefix, file) => [
      [
        'file',
        async () => {
          const path = join(await mkdtemp(join(tmpdir(), prefix)), 'db.json');
          return () => new FileStore(path, file);
        },
      ],
      [
        'postgres',
        async () => {
          const db = await database();
          return () => new PostgresStore(db.url, { catchupMs: 100 });
        },
      ],
    ],
  };
}
