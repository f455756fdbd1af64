/**
 * What a daemon reads of a PostgreSQL store at start: every key, a page per statement; no audit
 * event (the trail is read when asked); and only the revocations its keys do not show yet.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { validateStoreData } from '../../src/store/store-validation.js';
import { bigStoreData } from '../helpers/big-store.js';
import { db, useFreshDatabase } from '../helpers/postgres-lifecycles.js';

useFreshDatabase();

describe('a PostgreSQL store at start', () => {
  it('reads every key a page at a time, no audit event, and the trail when asked', async () => {
    const data = validateStoreData('big', bigStoreData({ instances: 3, keys: 50, events: 120 }));
    // Every counter and time of a key's usage, each a value of its own, and a split by route.
    const used = data.keys[3]!;
    used.lastUsedAt = '2026-11-02T10:00:00.000Z';
    used.usage = {
      requests: 2 ** 40,
      promptTokens: 11,
      completionTokens: 12,
      reasoningTokens: 13,
      errors: 14,
      disconnects: 15,
      estimatedTokens: 16,
      firstUsedAt: '2026-11-02T09:00:00.000Z',
      byRoute: { chat: { requests: 5, promptTokens: 6, completionTokens: 7 } },
    };
    const target = new PostgresStore(db.url);
    await target.replaceAll(data, false);
    await target.close();

    // Pages of 7: 50 keys take 8 statements, the last one short; the audit trail the same.
    const store = new PostgresStore(db.url, { keyPage: 7, auditPage: 7 });
    try {
      const loaded = await store.load();
      expect(loaded.keys).toEqual(data.keys);
      expect(loaded.events).toEqual([]);
      expect(await store.auditEvents({ limit: 5 })).toEqual(data.events.slice(-5));
      expect((await store.auditEvents({ instance: 'big-1', limit: 1000 })).map((e) => e.seq)).toEqual(
        data.events.filter((e) => e.instance === 'big-1').map((e) => e.seq),
      );
      for (const limit of [7, 14, 50, 119, 120, 121, 1000])
        expect(await store.auditEvents({ limit })).toEqual(data.events.slice(-limit));
      const own = data.events.filter((e) => e.instance === 'big-2');
      expect(await store.auditEvents({ instance: 'big-2', limit: 9 })).toEqual(own.slice(-9));
    } finally {
      await store.close();
    }
  });

  it('revokes a key ob_revocations holds though its row shows it active, and counts it shared', async () => {
    const data = validateStoreData('big', bigStoreData({ instances: 2, keys: 10, events: 0 }));
    const target = new PostgresStore(db.url);
    await target.replaceAll(data, false);
    await target.close();
    const active = data.keys.find((k) => k.status === 'active')!;
    const c = new pg.Client(db.url);
    await c.connect();
    try {
      await c.query("INSERT INTO ob_revocations (key_id, record, origin) VALUES ($1, $2, 'elsewhere')", [
        active.id,
        JSON.stringify({
          ...active,
          status: 'revoked',
          revokedAt: '2026-11-03T00:00:00.000Z',
          revokeReason: 'rotated',
        }),
      ]);
    } finally {
      await c.end();
    }

    const store = new PostgresStore(db.url);
    try {
      const loaded = await store.load();
      expect(loaded.keys.find((k) => k.id === active.id)).toMatchObject({
        status: 'revoked',
        revokedAt: '2026-11-03T00:00:00.000Z',
        revokeReason: 'rotated',
      });
      expect(store.isRevocationShared(active.id)).toBe(true);
      expect(loaded.keys.filter((k) => k.status === 'revoked').length).toBe(
        data.keys.filter((k) => k.status === 'revoked').length + 1,
      );
    } finally {
      await store.close();
    }
  });
});
