import { errText } from './notices.js';

/** Where a store URL points, as the commands that fix a missing piece need it. */
export interface PgTarget {
  host: string;
  port: string;
  database: string;
  user: string;
}

/**
 * The URL's host, port, database and role, read as node-postgres reads them (the query's
 * `host`, `port`, `dbname`/`db`, `user` win). A role or database the URL leaves to the
 * environment is not guessed: ROLE and DATABASE stand in for them. Never its password.
 */
export function pgTarget(url: string): PgTarget {
  try {
    const u = new URL(url);
    const q = u.searchParams;
    const path = decodeURIComponent(u.pathname.replace(/^\//, ''));
    return {
      host: q.get('host') ?? (u.hostname === '' ? 'localhost' : decodeURIComponent(u.hostname)),
      port: q.get('port') ?? (u.port === '' ? '5432' : u.port),
      database: q.get('dbname') ?? q.get('db') ?? (path === '' ? 'DATABASE' : path),
      user: q.get('user') ?? (u.username === '' ? 'ROLE' : decodeURIComponent(u.username)),
    };
  } catch {
    return { host: 'localhost', port: '5432', database: 'DATABASE', user: 'ROLE' };
  }
}

/** A word for a shell command line: quoted unless it is plain. */
function sh(word: string): string {
  return /^[A-Za-z0-9_.:/@-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** An identifier for SQL: quoted unless it is plain lower case. */
function ident(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

const PAGE = 'docs/postgres.md';

/**
 * What to run when the server said which piece is missing: the database (3D000), the role
 * (28000, "role … does not exist"), a pg_hba.conf line for this host (28000), its password
 * (28P01), or its right to create ob-proxy's tables (42501). Null for any other failure: the caller says what it can.
 */
export function setupProblem(location: string, t: PgTarget, err: unknown): string | null {
  const e = err as { code?: unknown; message?: unknown };
  const message = typeof e.message === 'string' ? e.message : '';
  // The server names what it lacks: that name wins over the URL's reading of it.
  const named = /"([^"]+)" does not exist/.exec(message)?.[1];
  if (named !== undefined && e.code === '3D000') t = { ...t, database: named };
  if (named !== undefined && e.code === '28000') t = { ...t, user: named };
  const on = `-h ${sh(t.host)} -p ${sh(t.port)}`;
  switch (e.code) {
    case '3D000':
      return `The store ${location} cannot be used: the database ${sh(t.database)} does not exist on ${t.host}:${t.port}. Create it, owned by the role the URL names, as a PostgreSQL superuser: createdb ${on} -U postgres -O ${sh(t.user)} ${sh(t.database)} (${PAGE}). Then start again: ob-proxy creates its tables itself.`;
    case '28000':
      if (/no pg_hba\.conf entry/.test(message))
        return `The store ${location} cannot be used: PostgreSQL does not let this host in as ${sh(t.user)} (${errText(err)}). Add a line for it to the server's pg_hba.conf (host ${t.database} ${t.user} <this host's address>/32 scram-sha-256) and reload the server: SELECT pg_reload_conf(); (${PAGE}).`;
      if (!/role .* does not exist/.test(message)) return null;
      return `The store ${location} cannot be used: the role ${sh(t.user)} does not exist on ${t.host}:${t.port}. Create it, as a PostgreSQL superuser: createuser ${on} -U postgres --pwprompt ${sh(t.user)} (then the database, owned by it: ${PAGE}).`;
    case '28P01':
      return `The store ${location} cannot be used: PostgreSQL refused the password of the role ${sh(t.user)} (${errText(err)}). Put the role's password in the URL; a superuser sets it with ALTER ROLE ${ident(t.user)} PASSWORD '…'; (${PAGE}).`;
    case '42501':
      return `The store ${location} cannot be used: the role ${sh(t.user)} may not create ob-proxy's tables in the database ${sh(t.database)} (${errText(err)}). Make it the database's owner, as a PostgreSQL superuser: psql ${on} -U postgres -c 'ALTER DATABASE ${ident(t.database)} OWNER TO ${ident(t.user)};' (${PAGE}).`;
    default:
      return null;
  }
}
