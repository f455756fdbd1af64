/**
 * A key's usage split by route (src/domain/route-usage.ts): added up in report order, kept by the
 * memory and file stores across a reload, absent from a store written before it (the totals
 * kept, the split empty), and reported per key and per pack. PostgreSQL's side is in
 * postgres-store-usage.test.ts; the CLI's in cli-usage-routes.test.ts; the data plane's in
 * test/inproc/usage-by-route.test.ts.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addUsage, emptyUsage } from '../../src/domain/key.js';
import { addByRoute } from '../../src/domain/route-usage.js';
import { FileStore } from '../../src/store/file-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { type Store, type StoreData, type UsageDelta, emptyData } from '../../src/store/store.js';
import { usageReport } from '../../src/wire/usage-report.js';
import { keyRecord } from '../helpers/key-record.js';

const AT = '2026-11-24T01:00:00.000Z';

function delta(keyId: string, byRoute: UsageDelta['byRoute']): UsageDelta {
  const sum = Object.values(byRoute).reduce(
    (t, r) => ({
      requests: t.requests + r.requests,
      promptTokens: t.promptTokens + r.promptTokens,
      completionTokens: t.completionTokens + r.completionTokens,
    }),
    { requests: 0, promptTokens: 0, completionTokens: 0 },
  );
  return { keyId, ...emptyUsage(), ...sum, firstUsedAt: AT, lastUsedAt: AT, byRoute };
}

function seeded(): StoreData {
  return {
    ...emptyData(),
    keys: [keyRecord('k1', { hash: 'a'.repeat(64) }), keyRecord('k2', { hash: 'b'.repeat(64) })],
  };
}

describe('usage by route', () => {
  it('adds up per route, in report order (chat, responses, completions, messages, then others), changing neither side', () => {
    const a = { messages: { requests: 1, promptTokens: 2, completionTokens: 3 } };
    const b = {
      zeta: { requests: 1, promptTokens: 0, completionTokens: 0 },
      messages: { requests: 2, promptTokens: 1, completionTokens: 1 },
      chat: { requests: 5, promptTokens: 50, completionTokens: 9 },
      alpha: { requests: 1, promptTokens: 0, completionTokens: 0 },
    };
    const sum = addByRoute(a, b);
    expect(JSON.stringify(sum)).toBe(
      JSON.stringify({
        chat: { requests: 5, promptTokens: 50, completionTokens: 9 },
        messages: { requests: 3, promptTokens: 3, completionTokens: 4 },
        alpha: { requests: 1, promptTokens: 0, completionTokens: 0 },
        zeta: { requests: 1, promptTokens: 0, completionTokens: 0 },
      }),
    );
    expect(a).toEqual({ messages: { requests: 1, promptTokens: 2, completionTokens: 3 } });
    expect(sum.chat).not.toBe(b.chat);
    // An increment from a daemon that does not split by route adds to the totals only.
    const { byRoute: _none, ...old } = delta('k1', {});
    expect(addUsage({ ...emptyUsage(), byRoute: a }, old).byRoute).toEqual(a);
  });

  describe.each([
    ['memory', async (data: StoreData) => ({ store: new MemoryStore(data), again: (s: Store) => s })],
    [
      'file',
      async (data: StoreData) => {
        const path = join(await mkdtemp(join(tmpdir(), 'obt-route-')), 'db.json');
        await writeFile(path, JSON.stringify(data));
        return { store: new FileStore(path) as Store, again: () => new FileStore(path) as Store };
      },
    ],
  ])('the %s store', (_name, open) => {
    it('keeps the split across flushes and a reload; a key put again keeps its counters', async () => {
      const { store, again } = await open(seeded());
      await store.load();
      await store.commit([
        { op: 'addUsage', ...delta('k1', { responses: { requests: 2, promptTokens: 20, completionTokens: 7 } }) },
      ]);
      await store.commit([
        {
          op: 'addUsage',
          ...delta('k1', {
            messages: { requests: 1, promptTokens: 4, completionTokens: 5 },
            responses: { requests: 1, promptTokens: 1, completionTokens: 1 },
          }),
        },
        { op: 'addUsage', ...delta('k2', { chat: { requests: 1, promptTokens: 3, completionTokens: 3 } }) },
        // A record put again (a revocation) carries an older view of the counters: the store's stay.
        {
          op: 'putKey',
          key: keyRecord('k1', { hash: 'a'.repeat(64), status: 'revoked', revokedAt: AT, revokeReason: 'manual' }),
        },
      ]);
      await store.close();
      const reopened = again(store);
      const data = await reopened.load();
      await reopened.close();
      const k1 = data.keys.find((k) => k.id === 'k1')!;
      expect(k1.status).toBe('revoked');
      expect(k1.usage).toEqual({
        ...emptyUsage(),
        requests: 4,
        promptTokens: 25,
        completionTokens: 13,
        firstUsedAt: AT,
        byRoute: {
          responses: { requests: 3, promptTokens: 21, completionTokens: 8 },
          messages: { requests: 1, promptTokens: 4, completionTokens: 5 },
        },
      });
      expect(Object.keys(k1.usage.byRoute)).toEqual(['responses', 'messages']);
      expect(data.keys.find((k) => k.id === 'k2')!.usage.byRoute).toEqual({
        chat: { requests: 1, promptTokens: 3, completionTokens: 3 },
      });
    });
  });

  it('a file store written before the split loads with its totals and an empty split, and adds to it', async () => {
    const data = seeded();
    const old = {
      ...data,
      keys: data.keys.map((k) => ({
        ...k,
        lastUsedAt: AT,
        usage: { requests: 7, promptTokens: 70, completionTokens: 700 },
      })),
    };
    const path = join(await mkdtemp(join(tmpdir(), 'obt-route-')), 'db.json');
    await writeFile(path, JSON.stringify(old));
    const store = new FileStore(path);
    const loaded = await store.load();
    expect(loaded.keys[0]!.usage).toEqual({
      ...emptyUsage(),
      requests: 7,
      promptTokens: 70,
      completionTokens: 700,
      byRoute: {},
    });
    await store.commit([
      { op: 'addUsage', ...delta('k1', { chat: { requests: 1, promptTokens: 1, completionTokens: 2 } }) },
    ]);
    await store.close();
    const reopened = new FileStore(path);
    const k1 = (await reopened.load()).keys.find((k) => k.id === 'k1')!;
    await reopened.close();
    expect(k1.usage).toMatchObject({
      requests: 8,
      promptTokens: 71,
      completionTokens: 702,
      byRoute: { chat: { requests: 1, promptTokens: 1, completionTokens: 2 } },
    });
  });

  it('a file store writes the split into db.json under the key’s usage', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'obt-route-')), 'db.json');
    await writeFile(path, JSON.stringify(seeded()));
    const store = new FileStore(path);
    await store.load();
    await store.commit([
      { op: 'addUsage', ...delta('k2', { completions: { requests: 1, promptTokens: 2, completionTokens: 3 } }) },
    ]);
    await store.close();
    const db = JSON.parse(await readFile(path, 'utf8')) as StoreData;
    expect(db.keys.find((k) => k.id === 'k2')!.usage.byRoute).toEqual({
      completions: { requests: 1, promptTokens: 2, completionTokens: 3 },
    });
  });

  it('the report gives each key its split, in report order and last, and each pack the sum per route', () => {
    const k1 = keyRecord('k1', {
      lastUsedAt: AT,
      usage: {
        ...emptyUsage(),
        requests: 3,
        promptTokens: 6,
        completionTokens: 9,
        byRoute: {
          messages: { requests: 1, promptTokens: 2, completionTokens: 3 },
          chat: { requests: 2, promptTokens: 4, completionTokens: 6 },
        },
      },
    });
    const k2 = keyRecord('k2', {
      createdAt: '2026-11-24T00:00:01.000Z',
      usage: {
        ...emptyUsage(),
        requests: 5,
        byRoute: { chat: { requests: 1, promptTokens: 0, completionTokens: 0 } },
      },
    });
    const report = usageReport(new Map(), [k2, k1], {});
    const [pack] = report.packs;
    expect(pack!.keys.map((k) => [k.id, k.byRoute])).toEqual([
      [
        'k1',
        {
          chat: { requests: 2, promptTokens: 4, completionTokens: 6 },
          messages: { requests: 1, promptTokens: 2, completionTokens: 3 },
        },
      ],
      // Used before the split was counted: its totals are more than its split.
      ['k2', { chat: { requests: 1, promptTokens: 0, completionTokens: 0 } }],
    ]);
    expect(Object.keys(pack!.keys[0]!)).toEqual([
      'id',
      'name',
      'status',
      'requests',
      'promptTokens',
      'completionTokens',
      'reasoningTokens',
      'errors',
      'disconnects',
      'estimatedTokens',
      'firstUsedAt',
      'lastUsedAt',
      'byRoute',
    ]);
    expect(Object.keys(pack!.keys[0]!.byRoute)).toEqual(['chat', 'messages']);
    expect(pack!.total).toMatchObject({
      requests: 8,
      byRoute: {
        chat: { requests: 3, promptTokens: 4, completionTokens: 6 },
        messages: { requests: 1, promptTokens: 2, completionTokens: 3 },
      },
    });
    expect(Object.keys(pack!.total).at(-1)).toBe('byRoute');
    // The report's split is a copy: the request path changes the key's own in place.
    expect(pack!.keys[0]!.byRoute.chat).not.toBe(k1.usage.byRoute.chat);
  });
});
