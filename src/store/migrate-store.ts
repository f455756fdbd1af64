import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { obError } from '../errors.js';
import { FileStore } from './file-store.js';
import type { TableCounts } from './postgres/import.js';
import { PostgresStore } from './postgres-store.js';
import { isPostgresUrl } from './store-url.js';
import { type LockHost, type LockPurpose, lockStore } from './store-lock.js';
import { upgradeStoreData } from './upgrade.js';

export interface MigrateReport {
  from: string;
  /** Without its password. */
  to: string;
  copied: TableCounts;
}

/**
 * `ob-proxy store migrate`: a lowdb store (db.json, with its revocation journal applied: a key
 * revoked only in the journal arrives revoked) copied into PostgreSQL. Secrets were never in
 * db.json; key hashes, usage and the audit trail are copied as they are.
 */
export async function migrateLowdbToPostgres(opts: {
  from: string;
  to: string;
  force: boolean;
  onNotice?: (message: string) => void;
  /** The process taking the source's store lock (lockHostOf(process)). */
  host: LockHost;
}): Promise<MigrateReport> {
  if (!isPostgresUrl(opts.to)) {
    throw obError('invalid_argument', {
      param: 'to',
      message: `--to must be a postgres:// URL, got "${opts.to.split('@').pop()}".`,
    });
  }
  try {
    await stat(opts.from);
  } catch (err) {
    throw obError('invalid_argument', {
      param: 'from',
      message: `No store at ${opts.from} (${(err as NodeJS.ErrnoException).code ?? 'error'}): give the db.json of a daemon's home with --from.`,
    });
  }
  // The daemons' own lock, held until the copy is committed: a daemon still running on the
  // source would go on changing it after it was read, and a key it revoked then would be active
  // in PostgreSQL. No daemon can start on it meanwhile either.
  const lock = await lockStore(opts.from, opts.host, MIGRATING);
  try {
    // Read only: the source may be a stopped daemon's store, left as it was (its journal replayed in memory).
    const source = new FileStore(opts.from, {
      readOnly: true,
      ...(opts.onNotice === undefined ? {} : { onNotice: opts.onNotice }),
    });
    let data;
    try {
      data = await source.load();
    } finally {
      await source.close();
    }
    // A store from before deployment ids is brought up to date as a daemon would at its start.
    const upgraded = upgradeStoreData(data, { newId: randomUUID, now: new Date().toISOString() }).data;
    const target = new PostgresStore(opts.to);
    try {
      const copied = await target.replaceAll(upgraded, opts.force);
      return { from: opts.from, to: target.location, copied };
    } finally {
      await target.close();
    }
  } finally {
    await lock.release();
  }
}

const MIGRATING: LockPurpose = {
  why: 'A copy taken while it runs would miss what it changes afterwards: a key it revoked would be active again in PostgreSQL.',
  instead: 'then run the migration again.',
};
