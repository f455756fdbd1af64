/**
 * The limit-count exchange of the PostgreSQL store (Store.shareLimits) on a fresh database on the
 * local server: each store writes one row per tick and reads every store's latest row of the ticks
 * before; its own old rows are deleted as it goes; a store that stops writing drops out of the
 * others' snapshots after the look-back (8 ticks); a tick with nothing to exchange (no key has a
 * limit) is skipped; the exchange's commit does not wait for the WAL (on a server of its own, whose
 * WAL counters are its alone). Real timers at a 50 ms period, awaited by outcome (eventually),
 * never by time.
 */
import pg from 'pg';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { LimitCounts, LimitSnapshot } from '../../src/store/store.js';
import { eventually } from '../helpers/processes.js';
import { type TestDatabase, freshDatabase, startCluster } from '../helpers/postgres.js';

const PERIOD = 50;
let db: TestDatabase;
const stores: PostgresStore[] = [];

beforeEach(async () => {
  db = await freshDatabase();
});
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  await db.drop();
});

async function daemon(
  counts: LimitCounts,
  needed?: () => boolean,
): Promise<{ store: PostgresStore; seen: LimitSnapshot[]; captures: () => number }> {
  const store = new PostgresStore(db.url, { catchupMs: 1000 });
  stores.push(store);
  await store.load();
  const seen: LimitSnapshot[] = [];
  let captures = 0;
  store.shareLimits({
    periodMs: PERIOD,
    capture: () => {
      captures++;
      return counts;
    },
    received: (snap) => seen.push(snap),
    ...(needed === undefined ? {} : { needed }),
  });
  return { store, seen, captures: () => captures };
}

it(
  "each daemon reads every daemon's row of the tick before; own old rows are deleted; a daemon gone drops out",
  { timeout: 30_000 },
  async () => {
    const a = await daemon({ window: 1, keys: { k1: [3, 10, 1, 4, 2, 5, 1] } });
    const b = await daemon({ window: 1, keys: {} });
    const both = (seen: LimitSnapshot[]): LimitSnapshot | undefined => seen.find((s) => s.nodes.size === 2);
    const onB = await eventually(() => both(b.seen), 'b reads both rows');
    expect(onB.self).toBe(b.store.origin);
    expect(Object.fromEntries(onB.nodes)).toEqual({
      [a.store.origin]: { window: 1, keys: { k1: [3, 10, 1, 4, 2, 5, 1] } },
      [b.store.origin]: { window: 1, keys: {} },
    });
    // Rows are kept 8 ticks per daemon (the look-back), then deleted by their writer.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const rowsOf = async (node: string): Promise<number> =>
        Number(
          (await client.query<{ n: string }>('SELECT count(*) AS n FROM ob_limit_counts WHERE node = $1', [node]))
            .rows[0]!.n,
        );
      await eventually(() => b.seen.length >= 20, 'twenty ticks', 20_000);
      expect(await rowsOf(a.store.origin)).toBeLessThanOrEqual(10);
      // a stops: b counts it with its last row for 8 ticks, then without it.
      await a.store.close();
      stores.splice(stores.indexOf(a.store), 1);
      const from = b.seen.length;
      await eventually(() => b.seen.slice(from).some((s) => s.nodes.size === 1), 'b reads its own row alone', 20_000);
      // Its last row was counted while within the look-back: snapshot of tick t reads ticks t-7 to t.
      const last = Number(
        (
          await client.query<{ t: string }>('SELECT max(tick) AS t FROM ob_limit_counts WHERE node = $1', [
            a.store.origin,
          ])
        ).rows[0]!.t,
      );
      const later = b.seen.filter((s) => s.tick > last);
      expect(later.map((s) => s.nodes.has(a.store.origin))).toEqual(later.map((s) => s.tick - 7 <= last));
      expect(later.some((s) => !s.nodes.has(a.store.origin))).toBe(true);
    } finally {
      await client.end();
    }
  },
);

it(
  'a tick whose exchange is not needed (no key has a limit) writes no row and reads none; needed again, it does both',
  {
    timeout: 30_000,
  },
  async () => {
    let needed = false;
    const a = await daemon({ window: 1, keys: {} });
    const b = await daemon({ window: 1, keys: {} }, () => needed);
    // a's snapshots go on, tick after tick, and never hold b.
    await eventually(() => a.seen.length >= 10, 'ten ticks on a', 20_000);
    expect(a.seen.some((s) => s.nodes.has(a.store.origin))).toBe(true);
    expect(a.seen.filter((s) => s.nodes.has(b.store.origin))).toEqual([]);
    expect({ captures: b.captures(), seen: b.seen.length }).toEqual({ captures: 0, seen: 0 });
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const rows = async (node: string): Promise<number> =>
        Number(
          (await client.query<{ n: string }>('SELECT count(*) AS n FROM ob_limit_counts WHERE node = $1', [node]))
            .rows[0]!.n,
        );
      expect(await rows(b.store.origin)).toBe(0);
      needed = true;
      const both = await eventually(() => b.seen.find((s) => s.nodes.size === 2), 'b reads both rows', 20_000);
      expect(Object.fromEntries(both.nodes)).toEqual({
        [a.store.origin]: { window: 1, keys: {} },
        [b.store.origin]: { window: 1, keys: {} },
      });
      expect(await rows(b.store.origin)).toBeGreaterThan(0);
    } finally {
      await client.end();
    }
  },
);

it(
  "the exchange's commit does not wait for the WAL to be written: a tick's row is worth a tick, not a WAL write and flush each",
  { timeout: 60_000 },
  async () => {
    // A server of its own, so that its WAL counters are the store's alone; the WAL writer's own
    // period long, so that what it writes on its own stays far below one write per exchange.
    const cluster = await startCluster();
    const admin = new pg.Client({ connectionString: cluster.url });
    try {
      await admin.connect();
      await admin.query("ALTER SYSTEM SET wal_writer_delay = '10s'");
      await admin.query('SELECT pg_reload_conf()');
      const store = new PostgresStore(cluster.url, { catchupMs: 60_000 });
      stores.push(store);
      await store.load();
      let captures = 0;
      const seen: LimitSnapshot[] = [];
      store.shareLimits({
        periodMs: PERIOD,
        capture: () => {
          captures++;
          return { window: 1, keys: { k1: [captures, 0, 0, 1, 1, 0, 0] } };
        },
        received: (snap) => seen.push(snap),
      });
      await eventually(() => seen.some((s) => s.nodes.has(store.origin)), 'its own row read back', 20_000);
      const writes = async (): Promise<number> =>
        // PostgreSQL 18 counts WAL writes in pg_stat_io (pg_stat_wal.wal_write is gone).
        Number(
          (await admin.query<{ n: string }>("SELECT sum(writes) AS n FROM pg_stat_io WHERE object = 'wal'")).rows[0]!.n,
        );
      const w0 = await writes();
      const c0 = captures;
      await eventually(() => captures >= c0 + 40, 'forty more exchanges', 30_000);
      const exchanged = captures - c0;
      // Committed synchronously, each exchange would have written the WAL at least once.
      expect((await writes()) - w0).toBeLessThan(exchanged / 2);
      // And the rows are there all the same.
      const { rows } = await admin.query<{ n: string }>('SELECT count(*) AS n FROM ob_limit_counts WHERE node = $1', [
        store.origin,
      ]);
      expect(Number(rows[0]!.n)).toBeGreaterThan(0);
    } finally {
      for (const s of stores.splice(0)) await s.close();
      await admin.end().catch(() => {});
      await cluster.destroy();
    }
  },
);
