/* global URL */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startPgServer } from '../test/helpers/pg-server.mjs';

let own;
/**
 * A PostgreSQL server of the bench's own, from npm (test/helpers/pg-server.mjs), started on first
 * use and stopped when the process exits. fsync on, as a deployment's server has it.
 */
function ownServer() {
  own ??= startPgServer({ settings: ['fsync=on'] });
  return own.then((s) => s.url);
}

/**
 * A database of the bench's own on the server at `serverUrl` (`--postgres`; without one, a server
 * of the bench's own), dropped after the run.
 */
export async function benchDatabase(serverUrl) {
  serverUrl ??= await ownServer();
  const name = `obbench_${randomBytes(5).toString('hex')}`;
  const admin = async (sql) => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return { url: u.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
