/**
 * PostgreSQL for tests, from npm (pg-server.mjs): nothing on the machine is needed. One server
 * serves the whole run (pg-global-setup.ts starts it, or OB_PROXY_TEST_PG names one), and
 * `freshDatabase` makes each test a database of its own on it (fast, for tests that never stop
 * the server); `startCluster` runs a whole server of its own, for tests that kill it with SIGKILL
 * and start it again.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { startPgServer } from './pg-server.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's PostgreSQL server (superuser, trust), as a URL. */
    obProxyTestPg: string | undefined;
  }
}

/** The run's server: OB_PROXY_TEST_PG, or the one the run's global setup started. */
export function testServer(): string {
  const url = inject('obProxyTestPg');
  if (url === undefined)
    throw new Error(
      'No PostgreSQL server for this run: the vitest config must name test/helpers/pg-global-setup.ts in globalSetup.',
    );
  return url;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

async function admin<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** An empty database `obt_<random>` on the server at `server` (default the run's). */
export async function freshDatabase(server = testServer()): Promise<TestDatabase> {
  const name = `obt_${randomBytes(6).toString('hex')}`;
  await admin(server, (c) => c.query(`CREATE DATABASE ${name}`));
  return {
    url: withDatabase(server, name),
    drop: () => admin(server, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  };
}

export interface Cluster {
  /** postgres://postgres@127.0.0.1:PORT/postgres */
  url: string;
  port: number;
  /** SIGKILL to the server and every backend: a crash, not a shutdown. */
  kill9(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

/** A server of the test's own, on a free port that stays its own across kill9 and start. */
export async function startCluster(): Promise<Cluster> {
  const s = await startPgServer();
  return {
    url: s.url,
    port: s.port,
    kill9: () => s.kill9(),
    start: () => s.start(),
    destroy: () => s.destroy(),
  };
}
