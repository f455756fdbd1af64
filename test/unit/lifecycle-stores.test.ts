/**
 * The lifecycle service on the file store and on the PostgreSQL store (a fresh database per
 * test): instances, keys, revocations, usage and the audit trail kept across a restart; a stop
 * revoking every key durably and an ended pack stopping its instance.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore } from '../../src/store/file-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { MODELS, T0, clock, db, open, ready, useFreshDatabase } from '../helpers/postgres-lifecycles.js';
import { eventually } from '../helpers/processes.js';

useFreshDatabase();

describe.each([
  ['file', async (): Promise<Store> => new FileStore(join(await mkdtemp(join(tmpdir(), 'obt-')), 'db.json'))],
  ['postgres', async (): Promise<Store> => new PostgresStore(db.url, { catchupMs: 100, now: clock.now })],
])('lifecycle on the %s store', (_name, makeStore) => {
  async function reopen(store: Store, make: () => Promise<Store>): Promise<LifecycleService> {
    await store.close();
    const again = await make();
    const lc = await LifecycleService.open({ store: again, clock, secrets: cryptoSecretSource, models: MODELS });
    open.push({ lc, store: again });
    return lc;
  }

  it('keeps instances, keys, revocations, usage and the audit trail across a restart', async () => {
    const store = await makeStore();
    const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
    const { key, secret } = await ready(lc);
    const other = await lc.createKey('gpu-1', 'ci');
    await lc.flushUsage([
      {
        keyId: other.key.id,
        requests: 4,
        promptTokens: 1,
        completionTokens: 2,
        reasoningTokens: 1,
        errors: 2,
        disconnects: 1,
        estimatedTokens: 3,
        firstUsedAt: '2026-11-23T11:00:00.000Z',
        lastUsedAt: '2026-11-23T11:30:00.000Z',
        byRoute: {
          responses: { requests: 3, promptTokens: 1, completionTokens: 0 },
          chat: { requests: 1, promptTokens: 0, completionTokens: 2 },
        },
      },
    ]);
    // A second batch adds to the counters; the first use stays the earliest.
    await lc.flushUsage([
      {
        keyId: other.key.id,
        requests: 1,
        promptTokens: 0,
        completionTokens: 0,
        reasoningTokens: 0,
        errors: 1,
        disconnects: 0,
        estimatedTokens: 2,
        firstUsedAt: '2026-11-23T11:40:00.000Z',
        lastUsedAt: '2026-11-23T11:40:00.000Z',
        byRoute: { messages: { requests: 1, promptTokens: 0, completionTokens: 0 } },
      },
    ]);
    await lc.revokeKey(key.id);
    await lc.addInstance({ id: 'gpu-2', model: 'qwen3.6:27b', packEndsAt: new Date(T0 + 3_600_000).toISOString() });
    await lc.remove('gpu-2');
    const make = store instanceof FileStore ? async () => new FileStore(store.location) : makeStore;
    const again = await reopen(store, make);
    expect(again.registry.authenticate(secret, T0, true)).toMatchObject({ ok: false, code: 'revoked_api_key' });
    expect(again.registry.authenticate(other.secret, T0, true)).toMatchObject({ ok: true });
    expect(again.registry.keys.get(other.key.id)?.usage).toEqual({
      requests: 5,
      promptTokens: 1,
      completionTokens: 2,
      reasoningTokens: 1,
      errors: 3,
      disconnects: 1,
      estimatedTokens: 5,
      firstUsedAt: '2026-11-23T11:00:00.000Z',
      byRoute: {
        chat: { requests: 1, promptTokens: 0, completionTokens: 2 },
        responses: { requests: 3, promptTokens: 1, completionTokens: 0 },
        messages: { requests: 1, promptTokens: 0, completionTokens: 0 },
      },
    });
    expect(Object.keys(again.registry.keys.get(other.key.id)!.usage.byRoute)).toEqual([
      'chat',
      'responses',
      'messages',
    ]);
    expect(again.registry.keys.get(other.key.id)?.lastUsedAt).toBe('2026-11-23T11:40:00.000Z');
    expect([...again.registry.instances.keys()]).toEqual(['gpu-1']);
    expect((await again.auditEvents({ limit: 10_000 })).map((e) => e.type)).toEqual([
      'instance.added',
      'instance.state',
      'key.created',
      'key.created',
      'key.revoked',
      'instance.added',
      'instance.removed',
    ]);
    const seqs = (await again.auditEvents({ limit: 10_000 })).map((e) => e.seq);
    expect([...seqs].sort((x, y) => x - y)).toEqual(seqs);
  });

  it('a stop revokes every key durably; an ended pack stops its instance', async () => {
    const store = await makeStore();
    let now = T0;
    const c = { now: () => now };
    const lc = await LifecycleService.open({ store, clock: c, secrets: cryptoSecretSource, models: MODELS });
    open.push({ lc, store });
    await lc.addInstance({
      id: 'gpu-1',
      model: 'gemma4:26b',
      endpoint: 'http://127.0.0.1:11434',
      packEndsAt: new Date(T0 + 60_000).toISOString(),
    });
    const k1 = await (await lc.ready('gpu-1')).defaultKey;
    await ready(lc, 'gpu-2');
    await lc.halt('gpu-2', 'stop');
    now += 60_000;
    // A shared store: only the daemon holding the chores lock ends packs.
    await eventually(() => store.holdsChores?.() !== false, 'the chores lock');
    const ended = await lc.endDuePacks();
    expect(ended.map((i) => i.id)).toEqual(['gpu-1']);
    expect(lc.registry.keys.get(k1!.id)).toMatchObject({ status: 'revoked', revokeReason: 'pack_ended' });
    expect([...lc.registry.keys.values()].every((k) => k.status === 'revoked')).toBe(true);
  });
});
