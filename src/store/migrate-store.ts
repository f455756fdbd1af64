import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { obError } from '../errors.js';
import { LowdbStore } from './lowdb-store.js';
import type { TableCounts } from './postgres/import.js';
import { PostgresStore, isPostgresUrl } from './postgres-store.js';
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
  // Read only: the source may be a stopped daemon's store, left as it was (its journal replayed in memory).
  const source = new LowdbStore(opts.from, {
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
}
