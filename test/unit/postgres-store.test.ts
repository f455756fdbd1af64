/**
 * The PostgreSQL store under the lifecycle service, with several "daemons" (lifecycles, each with
 * its own store) in one process on one fresh database on the local server.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import type { AuditEvent } from '../../src/domain/key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore } from '../../src/store/file-store.js';
import { MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { redactUrl } from '../../src/store/postgres/redact-url.js';
import type { Store } from '../../src/store/store.js';
import { eventually } from '../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';

const MODELS = ['gemma4:26b', 'qwen3.6:27b'];
const T0 = Date.parse('2026-11-23T12:00:00Z');
const clock = { now: () => T0 };

let db: TestDatabase;
const open: { lc: LifecycleService; store: Store }[] = [];

beforeEach(async () => {
  db = await freshDatabase();
});
afterEach(async () => {
  for (const o of open.splice(0)) await o.store.close();
  await db.drop();
});

async function node(
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

async function ready(lc: LifecycleService, id = 'gpu-1') {
  await lc.addInstance({ id, model: 'gemma4:26b', endpoint: 'http://127.0.0.1:11434' });
  const key = await (await lc.ready(id)).defaultKey;
  return { key: key!, secret: lc.claimSecret(key!.id)! };
}

describe('PostgreSQL store', () => {
  it('five daemons starting at once on an empty database migrate it once', async () => {
    const stores = Array.from({ length: 5 }, () => new PostgresStore(db.url));
    const loaded = await Promise.all(stores.map((s) => s.load()));
    expect(loaded.every((d) => d.instances.length === 0)).toBe(true);
    await Promise.all(stores.map((s) => s.close()));
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    const { rows } = await c.query('SELECT version FROM ob_schema_migrations');
    await c.end();
    expect(rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version })));
  });

  it('is chosen by a postgres:// URL; --max-stale must exceed the catch-up period', () => {
    const c = resolveConfig({ store: 'postgres://ob@db/obproxy' }, {}, '/home/x');
    expect(c).toMatchObject({
      store: 'postgres://ob@db/obproxy',
      maxStaleMs: 30_000,
      storeCatchupMs: 500,
      storeNotify: true,
    });
    expect(
      resolveConfig(
        {},
        { OB_PROXY_STORE: 'postgresql://db/x', OB_PROXY_MAX_STALE: '5', OB_PROXY_TEST_NO_NOTIFY: '1' },
        '/h',
      ),
    ).toMatchObject({ maxStaleMs: 5000, storeNotify: false });
    expect(() => resolveConfig({ maxStale: 1 }, { OB_PROXY_STORE_CATCHUP_MS: '1000' }, '/h')).toThrow(
      /must be longer than the store's catch-up period/,
    );
    expect(() => resolveConfig({ store: 'mysql://db/x' }, {}, '/h')).toThrow(/not supported/);
  });

  it('never shows a password in its location', () => {
    expect(redactUrl('postgres://ob:s3cret@db.example:5432/obproxy')).toBe('postgres://ob@db.example:5432/obproxy');
  });

  it('a key created on one daemon works on another; revoked there, it is refused here with a key.revoked event', async () => {
    const a = await node();
    const b = await node();
    const { key, secret } = await ready(a.lc);
    await eventually(() => b.lc.registry.authenticate(secret, T0, true).ok, 'B knows the key');
    expect(b.heard.map((e) => e.type)).toEqual(['instance.added', 'instance.state', 'key.created']);
    // Both daemons number events alike.
    expect(b.lc.registry.events.map((e) => e.seq)).toEqual(a.lc.registry.events.map((e) => e.seq));
    await b.lc.revokeKey(key.id);
    await eventually(() => !a.lc.registry.authenticate(secret, T0, true).ok, 'A refuses the key');
    // The refusal may come first (from ob_revocations), the event, numbered, with the change.
    await eventually(() => a.heard.at(-1)?.type === 'key.revoked', 'A hears the key.revoked event');
    expect(a.heard.at(-1)).toMatchObject({ type: 'key.revoked', keyId: key.id, reason: 'manual' });
    expect(a.heard.filter((e) => e.type === 'key.revoked')).toHaveLength(1);
  });

  it('the catch-up read alone (no NOTIFY) delivers changes', async () => {
    const a = await node();
    const b = await node({ notify: false, catchupMs: 200 });
    const { key, secret } = await ready(a.lc);
    await eventually(() => b.lc.registry.authenticate(secret, T0, true).ok, 'B knows the key');
    await a.lc.halt('gpu-1', 'stop');
    await eventually(() => b.lc.registry.keys.get(key.id)?.status === 'revoked', 'B sees the key revoked');
    expect(b.lc.registry.instances.get('gpu-1')?.state).toBe('stopped');
  });

  it('a key created through a daemon that has not heard of the stop is never usable', async () => {
    const a = await node();
    const b = await node({ notify: false, catchupMs: 60_000 });
    await ready(a.lc);
    // B hears of the ready instance once (a reload-free catch-up), then goes deaf.
    await b.store.load().then((d) => b.lc.applySnapshot(d));
    expect(b.lc.registry.instances.get('gpu-1')?.state).toBe('ready');
    await a.lc.halt('gpu-1', 'stop');
    await expect(b.lc.createKey('gpu-1', 'late')).rejects.toMatchObject({ code: 'instance_not_ready' });
    expect([...b.lc.registry.keys.values()].filter((k) => k.name === 'late')).toEqual([]);
  });

  it('a key created just before a stop decided elsewhere is revoked with the rest, on every daemon', async () => {
    const a = await node({ notify: false, catchupMs: 60_000 });
    const b = await node();
    await ready(b.lc);
    await a.store.load().then((d) => a.lc.applySnapshot(d));
    // B creates a key A has not heard of; A stops the instance from its older view.
    const late = await b.lc.createKey('gpu-1', 'late');
    expect(a.lc.registry.keys.has(late.key.id)).toBe(false);
    await a.lc.halt('gpu-1', 'stop');
    // A hears of the key from its own commit (the store revoked it on A's behalf) ...
    await eventually(() => a.lc.registry.keys.get(late.key.id)?.status === 'revoked', 'A knows the late key revoked');
    // ... and B from A's change.
    await eventually(() => !b.lc.registry.authenticate(late.secret, T0, true).ok, 'B refuses the late key');
    expect(b.lc.registry.keys.get(late.key.id)).toMatchObject({ status: 'revoked', revokeReason: 'instance_stopped' });
    const reloaded = await new PostgresStore(db.url).load();
    expect(reloaded.keys.find((k) => k.id === late.key.id)?.status).toBe('revoked');
    expect(reloaded.events.filter((e) => e.type === 'key.revoked' && e.keyId === late.key.id)).toHaveLength(1);
  });

  it('a daemon that missed changes no longer in the change log reloads everything, and emits what it missed', async () => {
    const a = await node();
    const notices: string[] = [];
    const b = await node({ notify: false, catchupMs: 60_000, notices });
    // B's first read is done; it reads again only when asked (notifications off, a long period).
    await b.store.sync();
    const { secret } = await ready(a.lc);
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query('DELETE FROM ob_changes');
    await c.end();
    await b.store.sync();
    expect(b.lc.registry.authenticate(secret, T0, true).ok).toBe(true);
    expect(b.heard.map((e) => e.type)).toEqual(['instance.added', 'instance.state', 'key.created']);
    expect(notices.some((n) => n.startsWith('Reloading the whole state'))).toBe(true);
  });

  const byRouteBoth = {
    chat: { requests: 3, promptTokens: 35, completionTokens: 50 },
    responses: { requests: 1, promptTokens: 10, completionTokens: 20 },
    messages: { requests: 1, promptTokens: 5, completionTokens: 30 },
  };

  it('usage counters from several daemons add up, by route too', async () => {
    const a = await node();
    const b = await node();
    const { key } = await ready(a.lc);
    await eventually(() => b.lc.registry.keys.has(key.id), 'B knows the key');
    // As the data plane's UsageTracker does: the registry's counters first, the delta flushed.
    Object.assign(a.lc.registry.keys.get(key.id)!.usage, { requests: 3, promptTokens: 30, completionTokens: 60 });
    await a.lc.flushUsage([
      {
        keyId: key.id,
        requests: 3,
        promptTokens: 30,
        completionTokens: 60,
        reasoningTokens: 6,
        errors: 1,
        disconnects: 0,
        estimatedTokens: 7,
        firstUsedAt: '2026-11-23T12:00:00.500Z',
        lastUsedAt: '2026-11-23T12:00:01.000Z',
        byRoute: {
          chat: { requests: 2, promptTokens: 20, completionTokens: 40 },
          responses: { requests: 1, promptTokens: 10, completionTokens: 20 },
        },
      },
    ]);
    await b.lc.flushUsage([
      {
        keyId: key.id,
        requests: 2,
        promptTokens: 20,
        completionTokens: 40,
        reasoningTokens: 4,
        errors: 1,
        disconnects: 1,
        estimatedTokens: 11,
        firstUsedAt: '2026-11-23T12:00:00.100Z',
        lastUsedAt: '2026-11-23T12:00:02.000Z',
        byRoute: {
          messages: { requests: 1, promptTokens: 5, completionTokens: 30 },
          chat: { requests: 1, promptTokens: 15, completionTokens: 10 },
        },
      },
    ]);
    // A revocation written afterwards carries A's older view of the counters: it must not win.
    await a.lc.revokeKey(key.id);
    const data = await new PostgresStore(db.url).load();
    expect(data.keys.find((k) => k.id === key.id)).toMatchObject({
      usage: {
        requests: 5,
        promptTokens: 50,
        completionTokens: 100,
        reasoningTokens: 10,
        errors: 2,
        disconnects: 1,
        estimatedTokens: 18,
        firstUsedAt: '2026-11-23T12:00:00.100Z',
        byRoute: byRouteBoth,
      },
      lastUsedAt: '2026-11-23T12:00:02.000Z',
    });
    // In report order, whatever order the daemons first used them in.
    expect(Object.keys(data.keys.find((k) => k.id === key.id)!.usage.byRoute)).toEqual([
      'chat',
      'responses',
      'messages',
    ]);
    await eventually(() => a.lc.registry.keys.get(key.id)?.usage.requests === 5, "A counts B's usage too");
    expect(a.lc.registry.keys.get(key.id)!.usage.byRoute).toEqual({
      // A's own registry counted none of its flushed split (the test set only its totals).
      messages: { requests: 1, promptTokens: 5, completionTokens: 30 },
      chat: { requests: 1, promptTokens: 15, completionTokens: 10 },
    });
  });

  it('a database made before the split by route loads with its totals and no split; the split then survives a flush and a reload', async () => {
    const a = await node();
    const { key } = await ready(a.lc);
    const totals = {
      keyId: key.id,
      requests: 4,
      promptTokens: 40,
      completionTokens: 80,
      reasoningTokens: 0,
      errors: 1,
      disconnects: 0,
      estimatedTokens: 2,
      firstUsedAt: '2026-11-23T12:00:00.500Z',
      lastUsedAt: '2026-11-23T12:00:01.000Z',
    };
    await a.lc.flushUsage([{ ...totals, byRoute: { chat: { requests: 4, promptTokens: 40, completionTokens: 80 } } }]);
    await a.store.close();
    open.splice(0);
    // The database as the release before the split left it: schema version 7, no table of routes.
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query('DROP TABLE ob_key_usage_by_route');
    await c.query('DELETE FROM ob_schema_migrations WHERE version = 8');
    await c.end();

    const b = await node();
    const { keyId: _id, lastUsedAt, ...usage } = totals;
    expect(b.lc.registry.keys.get(key.id)).toMatchObject({ usage: { ...usage, byRoute: {} }, lastUsedAt });
    const c2 = new pg.Client({ connectionString: db.url });
    await c2.connect();
    const { rows } = await c2.query<{ version: number }>('SELECT version FROM ob_schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));

    // Two deltas of the key in one flush (a failed flush put back) add up, the split too.
    const later = { ...totals, requests: 1, promptTokens: 3, completionTokens: 5, errors: 0, estimatedTokens: 0 };
    await b.lc.flushUsage([
      { ...later, byRoute: { responses: { requests: 1, promptTokens: 3, completionTokens: 5 } } },
      {
        ...later,
        byRoute: {
          responses: { requests: 1, promptTokens: 3, completionTokens: 5 },
          messages: { requests: 1, promptTokens: 0, completionTokens: 0 },
        },
      },
    ]);
    const split = await c2.query(
      'SELECT key_id, route, requests::int, prompt_tokens::int, completion_tokens::int FROM ob_key_usage_by_route ORDER BY route',
    );
    await c2.end();
    expect(split.rows).toEqual([
      { key_id: key.id, route: 'messages', requests: 1, prompt_tokens: 0, completion_tokens: 0 },
      { key_id: key.id, route: 'responses', requests: 2, prompt_tokens: 6, completion_tokens: 10 },
    ]);
    const data = await new PostgresStore(db.url).load();
    expect(data.keys.find((k) => k.id === key.id)!.usage).toEqual({
      ...usage,
      requests: 6,
      promptTokens: 46,
      completionTokens: 90,
      byRoute: {
        responses: { requests: 2, promptTokens: 6, completionTokens: 10 },
        messages: { requests: 1, promptTokens: 0, completionTokens: 0 },
      },
    });
  });

  it('one daemon at a time holds the chores lock; another takes over when it goes', async () => {
    const a = await node();
    await eventually(() => a.store.holdsChores(), 'A holds the chores');
    const b = await node();
    // B tries every period and never gets it while A lives.
    await eventually(() => b.store.lastInSync() > 0 && !b.store.holdsChores(), 'B in sync without the chores');
    await a.store.close();
    open.splice(
      open.findIndex((o) => o.store === a.store),
      1,
    );
    await eventually(() => b.store.holdsChores(), 'B takes over the chores');
  });
});

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
    expect(again.registry.events.map((e) => e.type)).toEqual([
      'instance.added',
      'instance.state',
      'key.created',
      'key.created',
      'key.revoked',
      'instance.added',
      'instance.removed',
    ]);
    const seqs = again.registry.events.map((e) => e.seq);
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
