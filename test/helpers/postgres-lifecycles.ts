/**
 * Several "daemons" in one process: lifecycles, each with its own PostgresStore, on a fresh
 * database per test. `useFreshDatabase` registers the hooks that make the database before each
 * test and, after it, close the stores opened on it (`open`) and drop it; `node` opens a daemon,
 * `ready` adds an instance and gives its default key and secret.
 */
import { afterEach, beforeEach } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import type { AuditEvent } from '../../src/domain/key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { type TestDatabase, freshDatabase } from './postgres.js';

export const MODELS = ['gemma4:26b', 'qwen3.6:27b'];
export const T0 = Date.parse('2026-11-23T12:00:00Z');
export const clock = { now: () => T0 };

export let db: TestDatabase;
export const open: { lc: LifecycleService; store: Store }[] = [];

export function useFreshDatabase(): void {
  beforeEach(async () => {
    db = await freshDatabase();
  });
  afterEach(async () => {
    for (const o of open.splice(0)) await o.store.close();
    await db.drop();
  });
}

export async function node(
  opts: { notify?: boolean; catchupMs?: number; notices?: string[] } = {},
): Promise<{ lc: LifecycleService; store: PostgresStore; heard: AuditEvent[] }> {
  const store = new PostgresStore(db.url, {
    catchupMs: opts.catchupMs ?? 100,
    notify: opts.notify ?? true,
    now: clock.now,
    onNotice: (m) => opts.notices?.push(m),
  });
  const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
  const heard: AuditEvent[] = [];
  lc.onChange((e, origin) => {
    if (origin === 'remote') heard.push(e);
  });
  open.push({ lc, store });
  return { lc, store, heard };
}

export async function ready(lc: LifecycleService, id = 'gpu-1') {
  await lc.addInstance({ id, model: 'gemma4:26b', endpoint: 'http://127.0.0.1:11434' });
  const key = await (await lc.ready(id)).defaultKey;
  return { key: key!, secret: lc.claimSecret(key!.id)! };
}
