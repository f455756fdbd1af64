/**
 * Usage counters in the PostgreSQL store, several "daemons" (lifecycles, each with its own store)
 * in one process on one fresh database: the deltas of several daemons add up, by route too, a
 * revocation's older view of them never wins, and a database made before the split by route is
 * migrated with its totals kept.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { db, node, open, ready, useFreshDatabase } from '../helpers/postgres-lifecycles.js';
import { eventually } from '../helpers/processes.js';

useFreshDatabase();

describe('PostgreSQL store', () => {
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
});
