/**
 * A PostgreSQL store that cannot be opened because a piece of its set-up is missing is answered
 * with the command that makes it (docs/postgres.md), from what the server said: a database that
 * does not exist names `createdb`, a role that does not exist `createuser`, a role that may not
 * create the tables the ALTER DATABASE that gives it the database. Against the run's server.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { pgTarget, setupProblem } from '../../src/store/postgres/setup-problems.js';
import { type TestDatabase, freshDatabase, testServer } from '../helpers/postgres.js';

const databases: TestDatabase[] = [];

afterEach(async () => {
  for (const db of databases.splice(0)) await db.drop();
});

async function refusal(url: string): Promise<string> {
  const store = new PostgresStore(url);
  try {
    await store.load();
  } catch (err) {
    return (err as Error).message;
  } finally {
    await store.close();
  }
  throw new Error('opened');
}

function at(url: string, change: (u: URL) => void): string {
  const u = new URL(url);
  change(u);
  return u.toString();
}

describe('a store whose set-up is missing a piece', () => {
  it('a missing database: the createdb to run, owned by the role the URL names', async () => {
    const url = at(testServer(), (u) => {
      u.pathname = '/obproxy_missing';
    });
    const { host, port, user } = pgTarget(url);
    const location = new URL(url);
    location.password = '';
    expect(await refusal(url)).toBe(
      `The store ${location.toString()} cannot be used: the database obproxy_missing does not exist on ${host}:${port}. Create it, owned by the role the URL names, as a PostgreSQL superuser: createdb -h ${host} -p ${port} -U postgres -O ${user} obproxy_missing (docs/postgres.md). Then start again: ob-proxy creates its tables itself.`,
    );
  });

  it('a missing role: the createuser to run', async () => {
    const url = at(testServer(), (u) => {
      u.username = 'ob_nobody';
      u.password = '';
    });
    const { host, port } = pgTarget(url);
    expect(await refusal(url)).toBe(
      `The store ${url} cannot be used: the role ob_nobody does not exist on ${host}:${port}. Create it, as a PostgreSQL superuser: createuser -h ${host} -p ${port} -U postgres --pwprompt ob_nobody (then the database, owned by it: docs/postgres.md).`,
    );
  });

  it('a role that may not create the tables: the database given to it', async () => {
    const db = await freshDatabase();
    databases.push(db);
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('DROP ROLE IF EXISTS ob_reader');
    await admin.query('CREATE ROLE ob_reader LOGIN');
    // PostgreSQL 15 and later: the public schema is its database owner's, not everyone's.
    await admin.query('REVOKE CREATE ON SCHEMA public FROM PUBLIC');
    await admin.end();
    const url = at(db.url, (u) => {
      u.username = 'ob_reader';
      u.password = '';
    });
    const { host, port, database } = pgTarget(url);
    const message = await refusal(url);
    expect(message).toMatch(
      new RegExp(
        `^The store .* cannot be used: the role ob_reader may not create ob-proxy's tables in the database ${database} \\(42501: permission denied for schema public\\)\\. `,
      ),
    );
    expect(message).toContain(
      `Make it the database's owner, as a PostgreSQL superuser: psql -h ${host} -p ${port} -U postgres -c 'ALTER DATABASE ${database} OWNER TO ob_reader;' (docs/postgres.md).`,
    );
    // Done as it says, the same URL opens.
    const owner = new pg.Client({ connectionString: db.url });
    await owner.connect();
    await owner.query(`ALTER DATABASE ${database} OWNER TO ob_reader`);
    await owner.end();
    const store = new PostgresStore(url);
    await expect(store.load()).resolves.toMatchObject({ instances: [] });
    await store.close();
    const cleanup = new pg.Client({ connectionString: db.url });
    await cleanup.connect();
    await cleanup.query(`ALTER DATABASE ${database} OWNER TO ${pgTarget(db.url).user}`);
    await cleanup.query('DROP OWNED BY ob_reader');
    await cleanup.end();
  });

  it('a refused password, and the words for names that need quoting', () => {
    const t = pgTarget('postgres://Ob%20Admin:secret@db.internal:6432/ob%20proxy?sslmode=require');
    expect(t).toEqual({ host: 'db.internal', port: '6432', database: 'ob proxy', user: 'Ob Admin' });
    expect(
      setupProblem('postgres://…', t, { code: '28P01', message: 'password authentication failed for user "Ob Admin"' }),
    ).toBe(
      `The store postgres://… cannot be used: PostgreSQL refused the password of the role 'Ob Admin' (28P01: password authentication failed for user "Ob Admin"). Put the role's password in the URL; a superuser sets it with ALTER ROLE "Ob Admin" PASSWORD '…'; (docs/postgres.md).`,
    );
    expect(pgTarget('postgres:///?host=/var/run/postgresql')).toEqual({
      host: '/var/run/postgresql',
      port: '5432',
      database: 'DATABASE',
      user: 'ROLE',
    });
    expect(
      setupProblem('postgres://…', pgTarget('postgres://ob@db.internal/obproxy'), {
        code: '28000',
        message: 'no pg_hba.conf entry for host "10.0.0.11", user "ob", database "obproxy", no encryption',
      }),
    ).toBe(
      `The store postgres://… cannot be used: PostgreSQL does not let this host in as ob (28000: no pg_hba.conf entry for host "10.0.0.11", user "ob", database "obproxy", no encryption). Add a line for it to the server's pg_hba.conf (host obproxy ob <this host's address>/32 scram-sha-256) and reload the server: SELECT pg_reload_conf(); (docs/postgres.md).`,
    );
    expect(setupProblem('x', t, { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' })).toBeNull();
  });
});
