/**
 * readDaemonReports (src/store/postgres/daemon-row.ts) on tables written by hand: which daemons
 * have applied a key's revocation, from its row of ob_revocations or the change that revoked it
 * (in `mutations` or in `extra`), or, once that change is pruned from the log, from the oldest
 * change kept; a key in neither is not shared; the asking daemon's own report is its memory.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDaemonReports } from '../../src/store/postgres/daemon-row.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';

let db: TestDatabase;
let pool: pg.Pool;
/** No revocation the database refused. */
const NONE = { count: 0, oldestAt: null };
const NOBODY = { origin: 'nobody', change: 0, cursor: null, unwritten: NONE };

function key(id: string, status: 'active' | 'revoked'): unknown[] {
  return [id, `h-${id}`, 'gpu-1', 'd1', status, JSON.stringify({ id, status, instance: 'gpu-1' })];
}

function revokes(id: string): string {
  return JSON.stringify([{ op: 'putKey', key: { id, status: 'revoked' } }]);
}

beforeAll(async () => {
  db = await freshDatabase();
  const store = new PostgresStore(db.url);
  await store.load();
  await store.close();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  // An idle connection the server ends (the run's server stopping, the database dropped) is not
  // what these tests read; unheard, its error would end the worker.
  pool.on('error', () => {});
  await pool.query('UPDATE ob_meta SET change_no = 6');
  for (const k of [key('k1', 'revoked'), key('k2', 'revoked'), key('k3', 'active'), key('k4', 'revoked')])
    await pool.query(
      'INSERT INTO ob_keys (id, hash, instance, deployment, status, record) VALUES ($1, $2, $3, $4, $5, $6)',
      k,
    );
  // Changes 1 and 2 are pruned (k4 was revoked by one of them); 4 revokes k1, 5 revokes k2 on
  // the writer's behalf (its extra).
  for (const [no, mutations, extra] of [
    [3, '[]', '[]'],
    [4, revokes('k1'), '[]'],
    [5, '[]', revokes('k2')],
    [6, '[]', '[]'],
  ] as const)
    await pool.query('INSERT INTO ob_changes (no, origin, mutations, extra) VALUES ($1, $2, $3, $4)', [
      no,
      'x',
      mutations,
      extra,
    ]);
  // Every daemon has read every revocation row there is (none): its point is the present.
  for (const [origin, change] of [
    ['d3', 3],
    ['d4', 4],
    ['d6', 6],
  ] as const)
    await pool.query(
      `INSERT INTO ob_daemons (origin, host, pid, started_at, applied_change, applied_revocations, applied_xip, max_stale_ms)
       VALUES ($1, 'h', 1, now(), $2, pg_snapshot_xmax(pg_current_snapshot()), '{}', 30000)`,
      [origin, change],
    );
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function pending(keys: string[], own = NOBODY): Promise<Record<string, number | null>> {
  const r = await readDaemonReports(pool, keys, own);
  return Object.fromEntries(r.daemons.map((d) => [d.id, d.pending]));
}

describe('which daemons have applied a revocation', () => {
  it('one written only as a change: the daemons past that change', async () => {
    expect(await pending(['k1'])).toEqual({ d3: 1, d4: 0, d6: 0 });
    expect(await pending(['k2'])).toEqual({ d3: 1, d4: 1, d6: 0 });
    expect(await pending(['k1', 'k2'])).toEqual({ d3: 2, d4: 1, d6: 0 });
  });

  it('one whose change was pruned: the daemons past every change not kept', async () => {
    expect(await pending(['k4'])).toEqual({ d3: 0, d4: 0, d6: 0 });
    await pool.query(`UPDATE ob_daemons SET applied_change = 1 WHERE origin = 'd3'`);
    try {
      expect(await pending(['k4'])).toEqual({ d3: 1, d4: 0, d6: 0 });
    } finally {
      await pool.query(`UPDATE ob_daemons SET applied_change = 3 WHERE origin = 'd3'`);
    }
  });

  it('one in ob_revocations: the daemons whose point is past its row, whatever their change', async () => {
    const { rows } = await pool.query<{ xid: string }>(
      `INSERT INTO ob_revocations (key_id, record, origin) VALUES ('k2', '{}', 'x') RETURNING xid::text`,
    );
    try {
      expect(await pending(['k2'])).toEqual({ d3: 1, d4: 1, d6: 0 });
      await pool.query(`UPDATE ob_daemons SET applied_revocations = ($1::bigint + 1)::text::xid8 WHERE origin = 'd3'`, [
        rows[0]!.xid,
      ]);
      expect(await pending(['k2'])).toEqual({ d3: 0, d4: 1, d6: 0 });
    } finally {
      await pool.query(`DELETE FROM ob_revocations WHERE key_id = 'k2'`);
      await pool.query(`UPDATE ob_daemons SET applied_revocations = pg_snapshot_xmax(pg_current_snapshot())`);
    }
  });

  it('a key revoked nowhere the others read is not shared, and no daemon counts it', async () => {
    const r = await readDaemonReports(pool, ['k1', 'k3', 'k9'], NOBODY);
    expect(r.notShared).toEqual(['k3', 'k9']);
    expect(r.daemons.map((d) => [d.id, d.pending])).toEqual([
      ['d3', 1],
      ['d4', 0],
      ['d6', 0],
    ]);
  });

  it('the asking daemon reports what it has applied now, not its row', async () => {
    const own = { origin: 'd3', change: 5, cursor: null, unwritten: NONE };
    expect(await pending(['k2'], own)).toEqual({ d3: 0, d4: 1, d6: 0 });
    const r = await readDaemonReports(pool, ['k2'], own);
    expect(r.daemons.find((d) => d.self)).toMatchObject({ id: 'd3', appliedChange: 5, changeLag: 1 });
  });
});
