/**
 * The PostgreSQL store under the lifecycle service, several "daemons" (lifecycles, each with its
 * own store) in one process on one fresh database on the local server: migrating once, how it is
 * chosen and named, keys and stops seen by every daemon (through NOTIFY, the catch-up read, or a
 * reload when the change log no longer holds what a daemon missed), and the chores lock.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config-resolve.js';
import { MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { redactUrl } from '../../src/store/postgres/redact-url.js';
import { T0, db, node, open, ready, useFreshDatabase } from '../helpers/postgres-lifecycles.js';
import { eventually } from '../helpers/processes.js';

useFreshDatabase();

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
    const again = new PostgresStore(db.url);
    const reloaded = await again.load();
    expect(reloaded.keys.find((k) => k.id === late.key.id)?.status).toBe('revoked');
    // The audit trail is read when asked, not at load.
    expect(reloaded.events).toEqual([]);
    const trail = await again.auditEvents({ limit: 10_000 });
    await again.close();
    expect(trail.filter((e) => e.type === 'key.revoked' && e.keyId === late.key.id)).toHaveLength(1);
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
