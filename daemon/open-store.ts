import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import { type Config, SETTINGS } from '../src/config.js';
import type { SecretSource } from '../src/domain/api-key.js';
import { LifecycleService } from '../src/services/lifecycle.js';
import { FileStore } from '../src/store/file-store.js';
import { type StoreLock, lockHostOf, lockStore } from '../src/store/store-lock.js';
import type { Store } from '../src/store/store.js';
import { storeFiles } from '../src/store/store-files.js';
import { isPostgresUrl } from '../src/store/store-url.js';
import type { Metrics } from './metrics/metrics.js';
import { makeFolder } from './private-home.js';
import { prepareSocketPath } from './socket-file.js';

export interface OpenedStore {
  store: Store;
  lifecycle: LifecycleService;
  /** The store's lock, held until shutdown; null for a shared store, or one a test passed in. */
  lock: StoreLock | null;
}

/**
 * Opens --store and loads the lifecycle from it: a file this daemon alone serves (locked first,
 * so that a second daemon on it changes nothing), or a PostgreSQL database several daemons share
 * (no lock, no files of its own). The socket path is checked before anything is read. On failure
 * whatever was opened is closed again.
 */
export async function openStore(
  config: Config,
  deps: { store?: Store | undefined; clock: Clock; secrets: SecretSource; metrics: Metrics | null; log: Logger },
): Promise<OpenedStore> {
  const { clock, metrics, log } = deps;
  const shared = isPostgresUrl(config.store);
  if (!shared) await makeFolder(dirname(config.store), "store's folder", SETTINGS.store, 'a path in a folder');
  // Before anything is bound or read: a second daemon on this store must change nothing.
  const lock = deps.store === undefined && !shared ? await lockStore(config.store, lockHostOf(process)) : null;
  let store: Store | undefined;
  try {
    await prepareSocketPath(config.socket, shared ? [] : storeFiles(config.store));
    store =
      deps.store ??
      (shared
        ? // pg is loaded only by the daemons that use it: less memory for the others.
          new (await import('../src/store/postgres-store.js')).PostgresStore(config.store, {
            catchupMs: config.storeCatchupMs,
            notify: config.storeNotify,
            onNotice: (message) => log.warn({ store: 'postgres' }, message),
            journalPath: join(config.home, 'postgres.revocations'),
            pid: process.pid,
            maxStaleMs: config.maxStaleMs,
          })
        : new FileStore(config.store, {
            onNotice: (message) => log.warn({ store: config.store }, message),
            ...(config.storeFoldBytes === null ? {} : { foldBytes: config.storeFoldBytes }),
          }));
    if (metrics !== null)
      store = (await import('./metrics/timed-store.js')).timedStore(store, (s) => metrics.storeWrite(s));
    const lifecycle = await LifecycleService.open({ store, clock, secrets: deps.secrets, models: config.models });
    return { store, lifecycle, lock };
  } catch (err) {
    await store?.close().catch(() => {});
    await lock?.release();
    throw err;
  }
}
