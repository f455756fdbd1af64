/**
 * The database failures a cluster of daemons must survive, triggered on a test database: the
 * counter row held by another session, and the database turned read-only (as after a failover
 * onto a standby) with every session of the daemons ended so that they reconnect read-only.
 */
import pg from 'pg';

function dbName(url: string): string {
  return new URL(url).pathname.slice(1);
}

/** Ends every session on the database but the admin's own (the daemons reconnect at once). */
export async function endSessions(admin: pg.Client, url: string): Promise<void> {
  await admin.query(
    'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [dbName(url)],
  );
}

/** Read-only for every session from now on, or writable again (the admin's own session is unchanged). */
export async function setReadOnly(admin: pg.Client, url: string, on: boolean): Promise<void> {
  await admin.query(`ALTER DATABASE ${dbName(url)} SET default_transaction_read_only = ${on ? 'on' : 'off'}`);
  await endSessions(admin, url);
}

/** A session holding the change counter row, as `BEGIN; SELECT * FROM ob_meta FOR UPDATE` leaves it. */
export async function holdCounter(url: string, settings: pg.ClientConfig = {}): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, ...settings });
  // The server may end it (an idle-in-transaction time-out): that is not this process's error.
  c.on('error', () => {});
  await c.connect();
  await c.query('BEGIN');
  await c.query('SELECT * FROM ob_meta FOR UPDATE');
  return c;
}
