import pg from 'pg';

/**
 * The connections a daemon writes and reads through, apart from its session connection
 * (session.ts). Invariants: no statement waits longer than QUERY_TIMEOUT_MS, the server gives up
 * on it a second sooner, and a transaction left idle is ended by the server, so a paused or stuck
 * daemon never holds a row the others wait for longer than a few seconds.
 */

// How long the daemon waits on one statement of the pool before it gives up (the server is told
// to give up a second sooner).
const QUERY_TIMEOUT_MS = 10_000;

/**
 * The settings of every pooled session. A transaction left idle (its daemon paused by Ctrl-Z or
 * a container pause while it held the counter row) is ended by the server after a few seconds,
 * which frees the row; a write waits for a lock a little longer than that, so a paused peer
 * costs the others a delay, not a failure, and a lock held by something else (a `psql` session)
 * fails the write after 5 s instead of holding this daemon's changes for the statement's 9 s.
 * Exported so that a test can hold the counter with the daemons' own settings.
 */
export const POOL_SESSION_SETTINGS = {
  // The server's own time-out, just under the client's: a statement the daemon gives up on
  // (waiting for a lock a stuck transaction holds) is cancelled there too, instead of waiting
  // on with its place in the queue, one more for every later write, until the server's
  // connections run out (test/inproc/postgres-store-locks.test.ts).
  statement_timeout: QUERY_TIMEOUT_MS - 1000,
  lock_timeout: 5000,
  idle_in_transaction_session_timeout: 4000,
} as const;

export interface Pools {
  /** Reads of the change log, revocations, this daemon's row, the limit exchange, the chores. */
  pool: pg.Pool;
  /** The transactions that take the change counter row. */
  writers: pg.Pool;
}

/**
 * Two pools: the transactions that take the counter row wait for it, and may all wait at once
 * behind a session holding it; the change-log reads, revocations and this daemon's row never
 * wait for it, so they must never wait for a connection behind those either.
 */
export function openPools(url: string, onLost: (err: Error) => void): Pools {
  // Fail fast when the database is away: a management command answers within seconds, and the
  // catch-up read notices on its next period.
  const config: pg.PoolConfig = {
    connectionString: url,
    connectionTimeoutMillis: 3000,
    query_timeout: QUERY_TIMEOUT_MS,
    ...POOL_SESSION_SETTINGS,
    idleTimeoutMillis: 10_000,
  };
  const pools = { pool: new pg.Pool({ ...config, max: 4 }), writers: new pg.Pool({ ...config, max: 3 }) };
  // An idle client whose server went away: without a listener this would end the process.
  for (const p of [pools.pool, pools.writers]) p.on('error', onLost);
  return pools;
}
