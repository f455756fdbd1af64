/**
 * `ob-proxy store migrate --from <home>/db.json --to postgres://…` copies instances,
 * key hashes, usage and the audit trail; refuses a non-empty database without --force; verifies
 * counts. A daemon on the PostgreSQL store then serves the same keys, refuses the same ones.
 */
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { AuditEvent } from '../../src/domain/key.js';
import { hello, postChat } from '../helpers/chat.js';
import { freshDatabase, type TestDatabase } from '../helpers/postgres.js';
import { runCli, type SimProcess, startServe, startSimulate, tmpHome } from '../helpers/processes.js';
import { chat, MODEL, readyInstance } from '../helpers/store-home.js';

let sim: SimProcess;
let db: TestDatabase;

beforeAll(async () => {
  [sim, db] = await Promise.all([startSimulate([MODEL], ['--chunks', '1']), freshDatabase()]);
});
afterAll(async () => {
  await sim?.stop();
  await db?.drop();
});

it(
  'copies a lowdb store into PostgreSQL, refuses to overwrite without --force, and a daemon serves it',
  { timeout: 60_000 },
  async () => {
    const home = await tmpHome();
    const lowdb = await startServe(home, [], { OB_PROXY_USAGE_FLUSH_MS: '50' });
    const api = new DaemonClient(join(home, 'ob-proxy.sock'));
    await api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
    const kept = (await api.ready('gpu-1', { wait: true })).defaultKey!.secret!;
    const gone = await api.createKey('gpu-1', 'gone');
    await api.revokeKey(gone.id);
    await api.addInstance({ id: 'gpu-2', model: MODEL });
    expect((await postChat(lowdb.baseUrl, kept, hello(MODEL))).status).toBe(200);
    const audit = await api.call<AuditEvent[]>('GET', '/v1/audit?limit=10000');
    await api.close();
    expect(await lowdb.stop()).toBe(0);

    const first = await runCli(['store', 'migrate', '--from', join(home, 'db.json'), '--to', db.url, '--json']);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({
      copied: { instances: 2, keys: 2, activeKeys: 1, revokedKeys: 1, events: audit.length, requests: 1 },
    });

    const again = await runCli(['store', 'migrate', '--from', join(home, 'db.json'), '--to', db.url]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/not empty.*--force/);
    expect(again.stderr.trim().split('\n')).toHaveLength(1);
    const forced = await runCli(['store', 'migrate', '--from', join(home, 'db.json'), '--to', db.url, '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toMatch(/counts verified/);

    const pgHome = await tmpHome();
    const pg = await startServe(pgHome, ['--store', db.url]);
    try {
      const pgApi = new DaemonClient(join(pgHome, 'ob-proxy.sock'));
      expect((await postChat(pg.baseUrl, kept, hello(MODEL))).status).toBe(200);
      expect((await postChat(pg.baseUrl, gone.secret, hello(MODEL))).status).toBe(401);
      const keys = await pgApi.listKeys();
      expect(keys.map((k) => [k.name, k.status])).toEqual([
        ['default', 'active'],
        ['gone', 'revoked'],
      ]);
      const pgAudit = await pgApi.call<AuditEvent[]>('GET', '/v1/audit?limit=10000');
      expect(pgAudit.map((e) => [e.seq, e.type])).toEqual(audit.map((e) => [e.seq, e.type]));
      // New events continue the numbering.
      await pgApi.createKey('gpu-1', 'after');
      const latest = await pgApi.call<AuditEvent[]>('GET', '/v1/audit?limit=10000');
      expect(Math.max(...latest.map((e) => e.seq))).toBe(Math.max(...audit.map((e) => e.seq)) + 1);
      await pgApi.close();
    } finally {
      await pg.stop();
    }
  },
);

/**
 * Regression: `ob-proxy store migrate --from <home>/db.json --to postgres://…` ran while the
 * daemon was still serving that store (the docs said to stop it first; nothing checked). The copy
 * was taken, the daemon went on: a key revoked through it afterwards was active in PostgreSQL,
 * and once the daemons moved there it answered 200 again. Now the migration takes the daemons'
 * own store lock for as long as it reads and copies: with a daemon running it is refused, exit 1,
 * naming the daemon's pid, and the database is left untouched.
 */
describe('store migrate is refused while a daemon serves the store', () => {
  let sim: SimProcess;
  let db: TestDatabase;
  beforeAll(async () => {
    [sim, db] = await Promise.all([startSimulate([MODEL], ['--chunks', '1']), freshDatabase()]);
  });
  afterAll(async () => {
    await sim?.stop();
    await db?.drop();
  });

  async function tablesIn(url: string): Promise<string[]> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const r = await c.query<{ t: string }>(
        "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
      );
      return r.rows.map((row) => row.t);
    } finally {
      await c.end();
    }
  }

  it(
    'refuses to migrate a store a daemon is serving; a key revoked meanwhile stays revoked',
    { timeout: 60_000 },
    async () => {
      const home = await tmpHome();
      const store = join(home, 'db.json');
      const lowdb = await startServe(home);
      const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);

      const during = await runCli(['store', 'migrate', '--from', store, '--to', db.url]);
      expect(during.code).toBe(1);
      expect(during.stdout).toBe('');
      expect(during.stderr).toBe(
        `error: Another ob-proxy daemon (pid ${lowdb.proc.pid}) is already using the store ${store}. ` +
          'A copy taken while it runs would miss what it changes afterwards: a key it revoked would be active again in PostgreSQL. ' +
          `Stop it first (kill -TERM ${lowdb.proc.pid}), then run the migration again.\n`,
      );
      expect(await tablesIn(db.url)).toEqual([]);

      // What the operator does next through the running daemon is part of what is copied.
      expect((await runCli(['keys', 'revoke', keyId], { home })).code).toBe(0);
      expect(await lowdb.stop()).toBe(0);
      const after = await runCli(['store', 'migrate', '--from', store, '--to', db.url, '--json']);
      expect(after.code, after.stderr).toBe(0);
      expect(JSON.parse(after.stdout)).toMatchObject({ copied: { keys: 1, activeKeys: 0, revokedKeys: 1 } });

      const pgHome = await tmpHome();
      const shared = await startServe(pgHome, ['--store', db.url]);
      try {
        const r = await postChat(shared.baseUrl, secret, chat());
        expect(r.status).toBe(401);
        expect(r.json).toEqual({
          error: expect.objectContaining({ code: 'revoked_api_key', type: 'authentication_error', param: null }),
        });
      } finally {
        expect(await shared.stop()).toBe(0);
      }
    },
  );
});
