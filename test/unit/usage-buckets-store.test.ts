/**
 * Usage by the hour in the stores: a flush's deltas added to the hour they name, kept across a
 * restart on the file store and PostgreSQL and added to by every daemon of a shared one; hours
 * older than a week rolled up into their day; carried by `store migrate`; and, summed, equal to
 * the keys' whole-life counters.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { type UsageBucket, DAY_MS, HOUR_MS, byStartAndKey, hourStart } from '../../src/domain/usage-buckets.js';
import { emptyUsage } from '../../src/domain/key.js';
import { UsageTracker } from '../../src/services/usage.js';
import { FileStore } from '../../src/store/file-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { rollUpBuckets } from '../../src/store/postgres/usage-buckets.js';
import type { UsageDelta } from '../../src/store/store.js';
import { useLifecycleStores } from '../helpers/lifecycle-stores.js';

const T0 = Date.parse('2026-11-23T12:00:00Z');
const clock = { now: () => T0 };
const ALL = { since: null, until: null, keyIds: null };
const { opened, open, database, durable } = useLifecycleStores({ clock, models: ['gemma4:26b'] });

function used(keyId: string, hour: number, requests: number, errors = 0): UsageDelta {
  return {
    keyId,
    ...emptyUsage(),
    requests,
    promptTokens: 10 * requests,
    completionTokens: 20 * requests,
    errors,
    lastUsedAt: new Date(hour).toISOString(),
    hour: hourStart(hour),
  };
}

function bucket(keyId: string, size: 'hour' | 'day', start: number, requests: number, errors = 0): UsageBucket {
  return {
    keyId,
    size,
    start: new Date(start).toISOString(),
    requests,
    promptTokens: 10 * requests,
    completionTokens: 20 * requests,
    errors,
  };
}

const STORES = durable('obu-', { now: () => T0 });

describe.each(STORES)('usage by the hour on the %s store', (_name, factory) => {
  it('adds each flush to its hour, keeps them across a restart, and sums to the whole-life counters', async () => {
    const make = await factory();
    const lc = await open(make());
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const a = (await lc.createKey('gpu-1', 'a')).key.id;
    const b = (await lc.createKey('gpu-1', 'b')).key.id;
    await lc.flushUsage([used(a, T0, 2), used(b, T0 + 60_000, 1, 1)]);
    await lc.flushUsage([used(a, T0 + 30 * 60_000, 3)]);
    await lc.flushUsage([used(a, T0 + HOUR_MS, 4)]);
    // A flush that counted nothing a bucket keeps (a later last use alone) makes no bucket.
    await lc.flushUsage([{ ...used(b, T0 + HOUR_MS, 0) }]);
    const expected = [bucket(a, 'hour', T0, 5), bucket(b, 'hour', T0, 1, 1), bucket(a, 'hour', T0 + HOUR_MS, 4)].sort(
      byStartAndKey,
    );
    expect(await lc.usageBuckets(ALL)).toEqual(expected);
    expect(await lc.usageBuckets({ since: new Date(T0 + 1).toISOString(), until: null, keyIds: new Set([a]) })).toEqual(
      [bucket(a, 'hour', T0, 5), bucket(a, 'hour', T0 + HOUR_MS, 4)],
    );
    expect(await lc.usageBuckets({ since: null, until: new Date(T0 + HOUR_MS).toISOString(), keyIds: null })).toEqual(
      expected.filter((x) => x.start === new Date(T0).toISOString()),
    );
    await opened.pop()!.close();

    const again = await open(make());
    const buckets = await again.usageBuckets(ALL);
    expect(buckets).toEqual(expected);
    for (const id of [a, b]) {
      const u = again.registry.keys.get(id)!.usage;
      const mine = buckets.filter((x) => x.keyId === id);
      expect(
        ['requests', 'promptTokens', 'completionTokens', 'errors'].map((f) =>
          mine.reduce((n, x) => n + (x[f as 'requests'] as number), 0),
        ),
      ).toEqual([u.requests, u.promptTokens, u.completionTokens, u.errors]);
    }
    // A backup through the daemon holds them.
    expect((await again.snapshot()).usageBuckets).toEqual(expected);
  });
});

describe('usage buckets, rolled up and carried', () => {
  it('the file store rolls hours older than a week into their day when it folds', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'obu-')), 'db.json');
    const lc = await open(new FileStore(file, { now: () => T0 }));
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const a = (await lc.createKey('gpu-1', 'a')).key.id;
    await lc.flushUsage([used(a, T0, 2), used(a, T0 + 3 * HOUR_MS, 1), used(a, T0 + 8 * DAY_MS, 7)]);
    await opened.pop()!.close();
    // Folded at the close after a change (and whenever the journal grows past its size): the
    // clock then says nine days later.
    const later = await open(new FileStore(file, { now: () => T0 + 9 * DAY_MS }));
    await later.flushUsage([used(a, T0 + 9 * DAY_MS, 1)]);
    await opened.pop()!.close();
    const folded = await open(new FileStore(file, { now: () => T0 + 9 * DAY_MS }));
    expect(await folded.usageBuckets(ALL)).toEqual([
      bucket(a, 'day', Date.parse('2026-11-23T00:00:00Z'), 3),
      bucket(a, 'hour', T0 + 8 * DAY_MS, 7),
      bucket(a, 'hour', T0 + 9 * DAY_MS, 1),
    ]);
  });

  it('PostgreSQL rolls them up in the chores, and store migrate carries them', async () => {
    const db = await database();
    const file = join(await mkdtemp(join(tmpdir(), 'obu-')), 'db.json');
    const lc = await open(new FileStore(file, { now: () => T0 }));
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const a = (await lc.createKey('gpu-1', 'a')).key.id;
    const old = Date.now() - 10 * DAY_MS;
    await lc.flushUsage([used(a, old, 2), used(a, old + HOUR_MS, 3), used(a, T0, 1)]);
    await opened.pop()!.close();
    const read = new FileStore(file, { readOnly: true, now: () => T0 });
    const data = await read.load();
    await read.close();
    const target = new PostgresStore(db.url, { catchupMs: 100 });
    opened.push(target);
    await target.replaceAll(data, false);
    expect((await target.usageBuckets(ALL)).sort(byStartAndKey)).toEqual(data.usageBuckets!.sort(byStartAndKey));
    const pool = new pg.Pool({ connectionString: db.url });
    await rollUpBuckets(pool);
    await pool.end();
    const day = Math.floor(old / DAY_MS) * DAY_MS;
    const days = Math.floor((old + HOUR_MS) / DAY_MS) * DAY_MS;
    const rolled = await target.usageBuckets(ALL);
    expect(rolled.filter((x) => x.size === 'day').reduce((n, x) => n + x.requests, 0)).toBe(5);
    expect(rolled.filter((x) => x.size === 'day').map((x) => x.start)).toEqual(
      [...new Set([day, days])].map((t) => new Date(t).toISOString()),
    );
    expect(rolled.filter((x) => x.size === 'hour')).toEqual([bucket(a, 'hour', T0, 1)]);
  });

  it('a delta put back after a failed write keeps the hour it was counted in', () => {
    const t = new UsageTracker({ countRequest: () => {}, countExchange: () => {} });
    const key = { id: 'k1', lastUsedAt: null } as never;
    t.record(key, T0, 'chat', 1, 0);
    const first = t.takeDirty('2026-11-23T12:00:00.000Z');
    t.restore(first);
    t.record(key, T0 + HOUR_MS, 'chat', 1, 0);
    expect(t.takeDirty('2026-11-23T13:00:00.000Z').map((d) => d.hour)).toEqual([
      '2026-11-23T12:00:00.000Z',
      '2026-11-23T13:00:00.000Z',
    ]);
  });
});
