/**
 * Per-key limits in the store: set at creation, changed with setKeyLimits (durable before it
 * applies, an audit event), kept across a restart on every store, heard by the other daemons of
 * a shared store; keys of stores written before limits existed load with none.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { validateStoreData } from '../../src/store/store-validation.js';
import { useLifecycleStores } from '../helpers/lifecycle-stores.js';
import { eventually } from '../helpers/processes.js';

const MODELS = ['gemma4:26b'];
const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };
const { opened, open, database, durable } = useLifecycleStores({ clock, models: MODELS });

async function readyInstance(lc: LifecycleService): Promise<void> {
  await lc.addInstance({ id: 'gpu-1', model: MODELS[0], endpoint: 'http://127.0.0.1:11434' });
  await (
    await lc.ready('gpu-1')
  ).defaultKey;
}

const STORES = durable('obl-');

describe.each(STORES)('key limits on the %s store', (_name, factory) => {
  it('are set at creation, changed field by field, audited, and survive a restart', async () => {
    const make = await factory();
    const lc = await open(make());
    await readyInstance(lc);
    const events: AuditEvent[] = [];
    lc.onChange((e) => events.push(e));
    const { key } = await lc.createKey('gpu-1', 'bot', { rpm: 60, concurrency: 2 });
    expect(key.limits).toEqual({ rpm: 60, tpm: null, concurrency: 2 });
    const held = lc.registry.keys.get(key.id)!;
    const changed = await lc.setKeyLimits(key.id, { tpm: 5000, rpm: null });
    // The very record the request path holds: the change applies to its next request.
    expect(changed).toBe(held);
    expect(held.limits).toEqual({ rpm: null, tpm: 5000, concurrency: 2 });
    expect(events.map((e) => [e.type, e.keyId, e.limits])).toEqual([
      ['key.created', key.id, { rpm: 60, tpm: null, concurrency: 2 }],
      ['key.limited', key.id, { rpm: null, tpm: 5000, concurrency: 2 }],
    ]);
    await expect(lc.setKeyLimits(key.id, { rpm: 0 })).rejects.toMatchObject({ code: 'invalid_argument', param: 'rpm' });
    await expect(lc.setKeyLimits(key.id, { tpm: 1.5 })).rejects.toMatchObject({
      code: 'invalid_argument',
      param: 'tpm',
    });
    await expect(lc.createKey('gpu-1', 'x', { concurrency: 'many' })).rejects.toMatchObject({
      code: 'invalid_argument',
      param: 'concurrency',
    });
    await expect(lc.setKeyLimits('nope', { rpm: 1 })).rejects.toMatchObject({ code: 'key_not_found' });
    await lc.revokeKey(key.id);
    await expect(lc.setKeyLimits(key.id, { rpm: 1 })).rejects.toMatchObject({ code: 'key_revoked' });
    await opened.pop()!.close();

    const again = await open(make());
    expect(again.registry.keys.get(key.id)!.limits).toEqual({ rpm: null, tpm: 5000, concurrency: 2 });
    const dflt = [...again.registry.keys.values()].find((k) => k.isDefault)!;
    expect(dflt.limits).toEqual({ rpm: null, tpm: null, concurrency: null });
    expect((await again.auditEvents({ limit: 10_000 })).filter((e) => e.type === 'key.limited')).toHaveLength(1);
  });
});

describe('key limits, shared and old stores', () => {
  it('a change through one daemon reaches the other daemons of a PostgreSQL store, in place', async () => {
    const db = await database();
    const a = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    const b = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    await readyInstance(a);
    const { key } = await a.createKey('gpu-1', 'bot');
    const onB = await eventually(() => b.registry.keys.get(key.id), 'the key on b');
    expect(onB.limits).toEqual({ rpm: null, tpm: null, concurrency: null });
    const heard: AuditEvent[] = [];
    b.onChange((e, origin) => {
      if (origin === 'remote') heard.push(e);
    });
    await a.setKeyLimits(key.id, { rpm: 10 });
    await eventually(() => onB.limits.rpm === 10, 'the limit on b');
    expect(heard.map((e) => [e.type, e.limits])).toEqual([['key.limited', { rpm: 10, tpm: null, concurrency: null }]]);
    // Revoked through b meanwhile: a's change is refused by the database, not applied.
    await b.revokeKey(key.id);
    await eventually(() => a.registry.keys.get(key.id)!.status === 'revoked', 'the revocation on a');
  });

  it('keys of a PostgreSQL store made before migration 2 get all-null limits', async () => {
    const db = await database();
    const lc = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    await readyInstance(lc);
    await opened.pop()!.close();
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    // As a version-1 database held it.
    await c.query(`UPDATE ob_keys SET record = record - 'limits'`);
    await c.query('DELETE FROM ob_schema_migrations WHERE version = 2');
    const again = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    const { rows } = await c.query<{ limits: unknown }>(`SELECT record->'limits' AS limits FROM ob_keys`);
    await c.end();
    expect(rows).toEqual([{ limits: { rpm: null, tpm: null, concurrency: null } }]);
    expect([...again.registry.keys.values()][0]!.limits).toEqual({ rpm: null, tpm: null, concurrency: null });
  });

  it('a file store written before limits existed loads with none; a bad limit names its field', async () => {
    const old = new MemoryStore();
    const lc = await open(old);
    await readyInstance(lc);
    const data = structuredClone(await old.load()) as unknown as { keys: Record<string, unknown>[] };
    delete data.keys[0]!.limits;
    expect(validateStoreData('db.json', data).keys[0]!.limits).toEqual({ rpm: null, tpm: null, concurrency: null });
    data.keys[0]!.limits = { rpm: -1, tpm: null, concurrency: null };
    expect(() => validateStoreData('db.json', data)).toThrow(
      /field "limits.rpm": expected null or a whole number from 1 to 1000000000, found -1/,
    );
  });
});
