/**
 * Whole daemons in process on one PostgreSQL database: each from `buildDaemon`, never listening,
 * on a PostgresStore that reads the test's clock, so that the time a daemon has been out of sync
 * moves only when the test moves it. The staleness verdict is taken when the test asks
 * (`checkStale`, the daemon's own StaleStoreWatch check), never by a timer, so a test decides
 * exactly which reads and writes of the store came before it. A daemon with no notifications and
 * a long catch-up period reads and reports once, at its start, then only when `store.sync()` is
 * called: a daemon paused, as far as the others can tell.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { type Daemon, buildDaemon } from '../../daemon/build-daemon.js';
import { StaleStoreWatch } from '../../daemon/stale-store-watch.js';
import { type Config } from '../../src/config.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { TestClock } from './inproc.js';
import { recordingLog } from './recording-log.js';

export interface PgDaemon {
  daemon: Daemon;
  store: PostgresStore;
  config: Config;
  /** What the store said it noticed. */
  notices: string[];
  /** GET /v1/models with `secret`: its status and error code, if any. */
  models(secret: string): Promise<{ status: number; code: string | null }>;
  /** The management API's `status`. */
  status(): Promise<{ storeSync: { state: string; problem: string | null } }>;
  /** Compares the store's last sync with --max-stale now, as the daemon's watch does every 100 ms. */
  checkStale(): boolean;
  close(): Promise<void>;
}

export async function pgDaemon(
  url: string,
  clock: TestClock,
  opts: { maxStaleMs: number; catchupMs?: number; notify?: boolean },
): Promise<PgDaemon> {
  const home = await mkdtemp(join(tmpdir(), 'obpg-'));
  const catchupMs = opts.catchupMs ?? 100;
  const config: Config = {
    ...resolveConfig({ home, port: 0, store: url }, {}, home),
    maxStaleMs: opts.maxStaleMs,
    storeCatchupMs: catchupMs,
    logLevel: 'warn',
  };
  const notices: string[] = [];
  const store = new PostgresStore(url, {
    catchupMs,
    notify: opts.notify ?? true,
    now: () => clock.now(),
    onNotice: (m) => notices.push(m),
    journalPath: join(home, 'postgres.revocations'),
    pid: process.pid,
    maxStaleMs: opts.maxStaleMs,
  });
  const logStream = new Writable({ write: (_chunk, _enc, done) => done() });
  const daemon = await buildDaemon(config, { version: 'test', clock, store, logStream });
  const watch = new StaleStoreWatch({
    store,
    clock,
    maxStaleMs: opts.maxStaleMs,
    flag: daemon.ctx,
    log: recordingLog().log,
  });
  return {
    daemon,
    store,
    config,
    notices,
    models: async (secret) => {
      const res = await daemon.dataPlane.inject({
        method: 'GET',
        url: '/v1/models',
        headers: { authorization: `Bearer ${secret}` },
      });
      const body = JSON.parse(res.body) as { error?: { code?: string } };
      return { status: res.statusCode, code: body.error?.code ?? null };
    },
    status: async () => JSON.parse((await daemon.management.inject({ method: 'GET', url: '/v1/status' })).body),
    checkStale: () => {
      watch.check();
      return daemon.ctx.storeStale;
    },
    close: async () => {
      await daemon.shutdown(0);
      await rm(home, { recursive: true, force: true });
    },
  };
}
