/**
 * Regression: `ob-proxy store migrate --from <home>/db.json --to postgres://…` ran while the
 * daemon was still serving that store (the docs said to stop it first; nothing checked). The copy
 * was taken, the daemon went on: a key revoked through it afterwards was active in PostgreSQL,
 * and once the daemons moved there it answered 200 again. Now the migration takes the daemons'
 * own store lock for as long as it reads and copies: with a daemon running it is refused, exit 1,
 * naming the daemon's pid, and the database is left untouched.
 */
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postChat } from '../../helpers/chat.js';
import { type SimProcess, runCli, startServe, startSimulate, tmpHome } from '../../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../../helpers/postgres.js';
import { MODEL, chat, readyInstance } from '../../helpers/store-home.js';

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
