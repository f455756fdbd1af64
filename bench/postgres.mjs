/* global URL */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A database of the bench's own on the server at `serverUrl`, dropped after the run. */
export async function benchDatabase(serverUrl) {
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
