import { mkdtemp, readFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { ObProxyError } from '../../src/errors.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { MutableRegistry } from '../../src/services/registry.js';
import { FileStore } from '../../src/store/file-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { eventually } from '../helpers/processes.js';

const MODELS = ['gemma4:26b', 'qwen3.6:27b'];
const T0 = Date.parse('2026-11-23T12:00:00Z');

function fakeClock(start = T0): { now(): number; advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

// The lifecycle's behaviour on each store: memory, the JSON file, and PostgreSQL (a fresh
// database on the local server per test).
const STORES: [string, () => Promise<Store>][] = [
  ['memory', async () => new MemoryStore()],
  ['file', async () => new FileStore(join(await mkdtemp(join(tmpdir(), 'obs-')), 'db.json'))],
  [
    'postgres',
    async () => {
      const db = await freshDatabase();
      databases.push(db);
      return new PostgresStore(db.url, { catchupMs: 100 });
    },
  ],
];
let makeStore: () => Promise<Store> = STORES[0]![1];
const opened: Store[] = [];
const databases: TestDatabase[] = [];

afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  for (const db of databases.splice(0)) await db.drop();
});

async function setup(given?: Store, clock = fakeClock()) {
  const store = given ?? (await makeStore());
  opened.push(store);
  const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
  // A shared store: packs are ended by the daemon holding its chores lock.
  await eventually(() => store.holdsChores?.() !== false, 'the chores lock');
  return { lc, store, clock };
}

async function readyInstance(lc: LifecycleService, id = 'gpu-1', packEndsAt?: string) {
  await lc.addInstance({ id, model: 'gemma4:26b', endpoint: 'http://127.0.0.1:11434/v1', packEndsAt });
  const { defaultKey } = await lc.ready(id);
  const key = await defaultKey;
  return { key: key!, secret: lc.claimSecret(key!.id)! };
}

describe.each(STORES)('lifecycle service on the %s store', (_name, factory) => {
  beforeEach(() => {
    makeStore = factory;
  });

  it('makes a default key in the background when an instance becomes ready, its secret handed out once', async () => {
    const { lc } = await setup();
    const { key, secret } = await readyInstance(lc);
    expect(key).toMatchObject({ name: 'default', isDefault: true, status: 'active', instance: 'gpu-1' });
    expect(lc.claimSecret(key.id)).toBeNull();
    expect(lc.registry.authenticate(secret, T0, true)).toMatchObject({ ok: true });
    expect(lc.registry.instances.get('gpu-1')!.endpoint).toBe('http://127.0.0.1:11434');
  });

  it('ends a due pack on the injected clock: stopped, keys revoked with pack_ended; the request path sees it before the timer', async () => {
    const { lc, clock } = await setup();
    const { secret } = await readyInstance(lc, 'gpu-1', new Date(T0 + 60_000).toISOString());
    expect(lc.nextPackEnd()).toBe(T0 + 60_000);
    clock.advance(60_000);
    expect(lc.registry.authenticate(secret, clock.now(), true)).toMatchObject({
      ok: false,
      code: 'revoked_api_key',
      packEnded: true,
    });
    const ended = await lc.endDuePacks();
    expect(ended.map((i) => i.state)).toEqual(['stopped']);
    expect([...lc.registry.keys.values()].map((k) => k.revokeReason)).toEqual(['pack_ended']);
    expect(lc.nextPackEnd()).toBeNull();
  });

  it('extending the pack keeps the id and the keys', async () => {
    const { lc, clock } = await setup();
    const { secret } = await readyInstance(lc, 'gpu-1', new Date(T0 + 60_000).toISOString());
    await lc.extend('gpu-1', new Date(T0 + 3_600_000).toISOString());
    clock.advance(120_000);
    expect(await lc.endDuePacks()).toEqual([]);
    expect(lc.registry.authenticate(secret, clock.now(), true)).toMatchObject({ ok: true });
  });

  it('a key whose creation could not be written is never usable and never reported', async () => {
    const store = new MemoryStore();
    const { lc } = await setup(store);
    await readyInstance(lc);
    store.failWrites = true;
    await expect(lc.createKey('gpu-1', 'x')).rejects.toMatchObject({ code: 'store_write_failed' });
    expect(lc.registry.keys.size).toBe(1);
  });

  it('a revocation whose write failed still takes effect at once, and is written with the next write', async () => {
    const store = new MemoryStore();
    const { lc } = await setup(store);
    const { secret } = await readyInstance(lc);
    store.failWrites = true;
    await expect(lc.halt('gpu-1', 'stop')).rejects.toMatchObject({
      code: 'store_write_failed',
      message: expect.stringContaining('Revoked in the running daemon'),
    });
    expect(lc.registry.authenticate(secret, T0, true)).toMatchObject({ ok: false, code: 'revoked_api_key' });
    store.failWrites = false;
    await lc.addInstance({ id: 'gpu-2', model: 'gemma4:26b' });
    const persisted = await store.load();
    expect(persisted.keys[0]!.status).toBe('revoked');
    expect(persisted.instances.find((i) => i.id === 'gpu-1')!.state).toBe('stopped');
  });

  it('terminated is final; a stopped instance made ready gets a new default key while old keys stay revoked', async () => {
    const { lc } = await setup();
    const first = await readyInstance(lc);
    await lc.halt('gpu-1', 'stop');
    const { defaultKey } = await lc.ready('gpu-1');
    const second = await defaultKey;
    expect(second!.id).not.toBe(first.key.id);
    expect(lc.registry.authenticate(first.secret, T0, true)).toMatchObject({ code: 'revoked_api_key' });
    await lc.halt('gpu-1', 'terminate');
    await expect(lc.ready('gpu-1')).rejects.toMatchObject({ code: 'invalid_transition' });
  });

  it('refuses bad input with invalid_argument and a sentence', async () => {
    const { lc } = await setup();
    for (const id of ['', ' ', '../x', 'a'.repeat(65), 'a\nb', 'ünï']) {
      await expect(lc.addInstance({ id, model: 'gemma4:26b' })).rejects.toMatchObject({
        code: 'invalid_argument',
        param: 'id',
      });
    }
    await readyInstance(lc);
    for (const name of ['', '   ', 'x'.repeat(65), 'a\u0007b', 'a\u202eb']) {
      await expect(lc.createKey('gpu-1', name)).rejects.toBeInstanceOf(ObProxyError);
    }
    await expect(
      lc.addInstance({ id: 'gpu-9', model: 'gemma4:26b', packEndsAt: '2020-01-01T00:00:00Z' }),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});

describe('file store', () => {
  it('persists through a reopen, with only hashes, written atomically', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'obs-'));
    const path = join(dir, 'db.json');
    const { lc } = await setup(new FileStore(path));
    const { secret } = await readyInstance(lc);
    await Promise.all(Array.from({ length: 20 }, (_, i) => lc.createKey('gpu-1', `k${i}`)));
    // Neither db.json nor the journal of commits since holds a secret.
    for (const file of [path, `${path}.journal`]) {
      const text = await readFile(file, 'utf8');
      expect(text).not.toContain(secret);
      expect(text).not.toMatch(/ob_sk_[0-9A-Za-z]{12}_/);
    }
    expect((await readFile(`${path}.journal`, 'utf8')).split('\n').length).toBeGreaterThan(20);
    // No temp file left behind; the journals live beside the store.
    expect(await readdir(dir)).toEqual(['db.json', 'db.json.journal', 'db.json.revocations']);
    const reopened = await setup(new FileStore(path));
    expect(reopened.lc.registry.keys.size).toBe(21);
    expect(reopened.lc.registry.authenticate(secret, T0, true)).toMatchObject({ ok: true });
  });

  it('refuses to start on a corrupt file and leaves it untouched', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'obs-'));
    const path = join(dir, 'db.json');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path, '{"version":1,"instan');
    await expect(new FileStore(path).load()).rejects.toThrow(/cannot be read.*left untouched/);
    expect(await readFile(path, 'utf8')).toBe('{"version":1,"instan');
  });
});

describe('UsageTracker', () => {
  it('counts how each exchange ended: reasoning and estimated tokens, errors and disconnects, and by route, in the key and in the delta to flush', async () => {
    const { UsageTracker } = await import('../../src/services/usage.js');
    const { emptyUsage } = await import('../../src/domain/key.js');
    const usage = new UsageTracker(new MutableRegistry());
    const key = { id: 'k1', lastUsedAt: null, usage: emptyUsage() } as unknown as Parameters<typeof usage.record>[0];
    const at = Date.UTC(2026, 10, 23, 5, 0, 0, 0);
    const routes = ['messages', 'chat', 'messages', 'responses'];
    for (const [i, outcome] of (['ok', 'error', 'disconnect', 'ok'] as const).entries()) {
      usage.record(key, at, routes[i]!, 0, 0);
      usage.finished(key, {
        route: routes[i]!,
        prompt: 3,
        completion: 5,
        reasoning: 2,
        estimated: outcome === 'disconnect' ? 8 : 0,
        outcome,
      });
    }
    const counts = {
      requests: 4,
      promptTokens: 12,
      completionTokens: 20,
      reasoningTokens: 8,
      errors: 1,
      disconnects: 1,
      estimatedTokens: 8,
      firstUsedAt: '2026-11-23T05:00:00.000Z',
      // In the order first used: reports put them in their own order (route-usage.ts).
      byRoute: {
        messages: { requests: 2, promptTokens: 6, completionTokens: 10 },
        chat: { requests: 1, promptTokens: 3, completionTokens: 5 },
        responses: { requests: 1, promptTokens: 3, completionTokens: 5 },
      },
    };
    expect(key.usage).toEqual(counts);
    expect(usage.takeDirty()).toEqual([{ keyId: 'k1', ...counts, lastUsedAt: '2026-11-23T05:00:00.000Z' }]);
    expect(usage.takeDirty()).toEqual([]);
  });

  it('records lastUsedAt as the ISO time of the request, to the millisecond', async () => {
    const { UsageTracker } = await import('../../src/services/usage.js');
    const usage = new UsageTracker(new MutableRegistry());
    const key = {
      lastUsedAt: null,
      usage: { requests: 0, promptTokens: 0, completionTokens: 0, byRoute: {} },
    } as unknown as Parameters<typeof usage.record>[0];
    for (const ms of [
      Date.UTC(2026, 10, 23, 5, 57, 33, 7),
      Date.UTC(2026, 10, 23, 5, 57, 33, 42),
      Date.UTC(2026, 10, 23, 5, 57, 33, 999),
      Date.UTC(2026, 10, 23, 5, 57, 34, 0),
      Date.UTC(2027, 0, 1, 0, 0, 0, 120),
    ]) {
      usage.record(key, ms, 'chat', 1, 2);
      expect(key.lastUsedAt).toBe(new Date(ms).toISOString());
    }
    expect(key.usage).toEqual({
      requests: 5,
      promptTokens: 5,
      completionTokens: 10,
      firstUsedAt: '2026-11-23T05:57:33.007Z',
      byRoute: { chat: { requests: 5, promptTokens: 5, completionTokens: 10 } },
    });
    expect(usage.takeDirty()).toMatchObject([
      {
        requests: 5,
        promptTokens: 5,
        completionTokens: 10,
        firstUsedAt: '2026-11-23T05:57:33.007Z',
        lastUsedAt: key.lastUsedAt,
      },
    ]);
  });
});
