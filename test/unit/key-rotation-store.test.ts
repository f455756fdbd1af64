/**
 * A rotation's grace, durably: the new key and the old key's planned revocation are one commit;
 * a daemon restarted during the grace still ends it, one restarted after it refuses the old key
 * from its first request and revokes it (reason rotated) before serving, and the revocation then
 * holds across every later start. On a shared store every daemon refuses the key at the end of
 * the grace by its own clock, and the one doing the chores revokes it for all.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { Store } from '../../src/store/store.js';
import { useLifecycleStores } from '../helpers/lifecycle-stores.js';
import { eventually } from '../helpers/processes.js';

const T0 = Date.parse('2026-11-23T12:00:00Z');
const HOUR = 3_600_000;
let now = T0;
const clock = { now: () => now };
const { opened, open, database, durable } = useLifecycleStores({ clock, models: ['gemma4:26b'] });

afterEach(() => {
  now = T0;
});

/** A shared store's daemon does the chores only once its session holds their lock. */
async function holdingChores(store: Store): Promise<void> {
  await eventually(() => store.holdsChores?.() !== false, 'the chores lock');
}

async function readyInstance(lc: LifecycleService): Promise<string> {
  await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
  await (
    await lc.ready('gpu-1')
  ).defaultKey;
  return (await lc.createKey('gpu-1', 'notebook', { rpm: 60 })).key.id;
}

const STORES = durable('obr-');

describe.each(STORES)('a rotation with a grace on the %s store', (_name, factory) => {
  it('survives a restart, is refused from its end, revoked once, and never active again', async () => {
    const make = await factory();
    const lc = await open(make());
    const oldId = await readyInstance(lc);
    const rotated = await lc.rotateKey(oldId, HOUR);
    expect(rotated.key).toMatchObject({ name: 'notebook', limits: { rpm: 60, tpm: null, concurrency: null } });
    expect(lc.nextPackEnd()).toBe(T0 + HOUR);
    await opened.pop()!.close();

    // Restarted during the grace: still planned, still served.
    now = T0 + HOUR / 2;
    const during = await open(make());
    const old = during.registry.keys.get(oldId)!;
    expect(old).toMatchObject({ status: 'active', revokeAt: new Date(T0 + HOUR).toISOString() });
    expect(during.registry.check(old, now, true).ok).toBe(true);
    expect(await during.endDuePacks()).toEqual([]);
    expect(old.status).toBe('active');
    await holdingChores(opened.at(-1)!);
    expect(await during.endDuePacks()).toEqual([]);
    expect(old.status).toBe('active');
    await opened.pop()!.close();

    // Restarted after it: refused at once, revoked by the first sweep, as a daemon's start runs it.
    now = T0 + 2 * HOUR;
    const after = await open(make());
    const due = after.registry.keys.get(oldId)!;
    expect(after.registry.check(due, now, true)).toMatchObject({
      ok: false,
      code: 'revoked_api_key',
      graceEnded: true,
    });
    const events: AuditEvent[] = [];
    after.onChange((e) => events.push(e));
    await holdingChores(opened.at(-1)!);
    await after.endDuePacks();
    expect(due).toMatchObject({ status: 'revoked', revokeReason: 'rotated', revokedAt: new Date(now).toISOString() });
    expect(events.map((e) => [e.type, e.keyId, e.reason])).toEqual([['key.revoked', oldId, 'rotated']]);
    expect(after.registry.check(after.registry.keys.get(rotated.key.id)!, now, true).ok).toBe(true);
    await opened.pop()!.close();

    const later = await open(make());
    expect(later.registry.keys.get(oldId)).toMatchObject({ status: 'revoked', revokeReason: 'rotated' });
    expect((await later.auditEvents({ limit: 10_000 })).filter((e) => e.keyId === oldId).map((e) => e.type)).toEqual([
      'key.created',
      'key.rotated',
      'key.revoked',
    ]);
    await later.endDuePacks();
    expect(
      (await later.auditEvents({ limit: 10_000 })).filter((e) => e.type === 'key.revoked' && e.keyId === oldId),
    ).toHaveLength(1);
  });
});

describe('rotations, shared and refused', () => {
  it('every daemon refuses the old key at the end of the grace; the chores holder revokes it for all', async () => {
    const db = await database();
    const a = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    const oldId = await readyInstance(a);
    const b = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    await a.rotateKey(oldId, HOUR);
    await eventually(() => b.registry.keys.get(oldId)?.revokeAt != null, 'the plan on b');
    expect(b.nextPackEnd()).toBe(T0 + HOUR);
    now = T0 + HOUR;
    expect(b.registry.check(b.registry.keys.get(oldId)!, now, true)).toMatchObject({ ok: false, graceEnded: true });
    await eventually(() => opened.some((s) => s.holdsChores?.() === true), 'the chores lock');
    await a.endDuePacks();
    await b.endDuePacks();
    // The key is refused by b as soon as the revocation row arrives; its event comes with the change.
    for (const lc of [a, b])
      await eventually(
        () => lc.registry.events.some((e) => e.type === 'key.revoked' && e.keyId === oldId),
        'the revocation event',
      );
    expect(b.registry.keys.get(oldId)!.status).toBe('revoked');
    for (const lc of [a, b])
      expect(lc.registry.events.filter((e) => e.type === 'key.revoked' && e.keyId === oldId)).toMatchObject([
        { reason: 'rotated' },
      ]);
  });

  it('a rotation the store cannot write changes nothing; no grace revokes the old key even so', async () => {
    const store = new MemoryStore();
    const lc = await open(store);
    const oldId = await readyInstance(lc);
    store.failWrites = true;
    await expect(lc.rotateKey(oldId, HOUR)).rejects.toMatchObject({ code: 'store_write_failed' });
    expect([...lc.registry.keys.keys()]).toHaveLength(2);
    expect(lc.registry.keys.get(oldId)!.revokeAt).toBeUndefined();
    store.failWrites = false;
    await expect(lc.rotateKey(oldId, -1)).rejects.toMatchObject({
      code: 'invalid_argument',
      message: 'The grace must be a duration from 0 to 30 days.',
    });
    await expect(lc.rotateKey(oldId, 31 * 24 * HOUR)).rejects.toMatchObject({ code: 'invalid_argument' });
    await lc.halt('gpu-1', 'stop');
    await expect(lc.rotateKey(oldId, 0)).rejects.toMatchObject({ code: 'key_revoked' });
  });
});
