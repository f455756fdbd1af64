/**
 * PostgreSQL for tests. `freshDatabase` makes a database of its own on the local server (fast,
 * for tests that never stop the server); `startCluster` runs a whole server in a temp folder on a
 * free port, for tests that kill it with SIGKILL and start it again.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { createServer } from 'node:net';
import { freePort } from './free-port.js';

const run = promisify(execFile);

/** The shared local server (trust auth); override with OB_PROXY_TEST_PG. */
export const LOCAL_PG = process.env.OB_PROXY_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/test';

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

/** An empty database `obt_<random>` on the server at `server` (default the local one). */
export async function freshDatabase(server = LOCAL_PG): Promise<TestDatabase> {
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

/**
 * PostgreSQL refuses to run as root: then initdb and pg_ctl run as the `postgres` user, in a
 * folder it owns.
 */
const asRoot = process.getuid?.() === 0;
function pgCommand(bin: string, args: string[]): Promise<{ stdout: string }> {
  const path = serverBinary(bin);
  return asRoot ? run('runuser', ['-u', 'postgres', '--', path, ...args]) : run(path, args);
}

/** initdb and pg_ctl by absolute path: on PATH, or where Debian puts them (off PATH). */
function serverBinary(bin: string): string {
  for (const dir of (process.env.PATH ?? '').split(':'))
    if (dir !== '' && existsSync(join(dir, bin))) return join(dir, bin);
  const debian = '/usr/lib/postgresql';
  const versions = existsSync(debian) ? readdirSync(debian).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(join(debian, v, 'bin', bin))) return join(debian, v, 'bin', bin);
  throw new Error(`${bin} not found: install PostgreSQL's server (Debian: apt-get install postgresql).`);
}

export async function startCluster(): Promise<Cluster> {
  const dir = await mkdtemp(join(tmpdir(), 'obpg-'));
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const data = join(dir, 'data');
  await pgCommand('initdb', ['-A', 'trust', '-U', 'postgres', '-D', data, '--no-sync']);
  const port = await freePort();
  const start = async (): Promise<void> => {
    await pgCommand('pg_ctl', [
      '-D',
      data,
      '-l',
      join(dir, 'log'),
      '-w',
      '-t',
      '30',
      'start',
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
    ]);
  };
  await start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    start,
    async kill9() {
      const pid = Number((await readFile(join(data, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      const { stdout } = await run('ps', ['-o', 'pid=', '--ppid', String(pid)]).catch(() => ({ stdout: '' }));
      for (const p of [
        pid,
        ...stdout
          .split('\n')
          .map((l) => Number(l.trim()))
          .filter((n) => n > 0),
      ]) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      // Until the port is free again, it is not down.
      for (;;) {
        const inUse = await new Promise<boolean>((resolve) => {
          const s = createServer();
          s.once('error', () => resolve(true));
          s.listen(port, '127.0.0.1', () => s.close(() => resolve(false)));
        });
        if (!inUse) break;
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async destroy() {
      await pgCommand('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}
