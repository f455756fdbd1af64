import type pg from 'pg';
import type { StoreData } from '../store.js';
import { type TableCounts, countTables, countsOf, importData } from './import.js';

/**
 * `ob-proxy store migrate`: writes a whole store into a database in one transaction, after
 * checking it is empty (unless `force`), and verifies the counts before committing. Invariant: a
 * copy that does not match, or a database not empty, changes nothing.
 */
export async function replaceAll(
  client: pg.PoolClient,
  location: string,
  data: StoreData,
  force: boolean,
  /** Runs first, on the same connection (the schema migration). */
  prepare: () => Promise<void>,
): Promise<TableCounts> {
  try {
    await prepare();
    await client.query('BEGIN');
    // The pools' 4 s bound on a transaction left idle guards the daemons against a stuck peer;
    // a copy of a million keys pauses longer than that between statements (its collector, on a
    // heap of GBs), and the server ended it. A minute still ends a copy whose process hangs.
    await client.query(`SET LOCAL idle_in_transaction_session_timeout = '60s'`);
    // The counter row first, as every write does: no daemon writes meanwhile.
    await client.query('SELECT change_no FROM ob_meta WHERE id = 1 FOR UPDATE');
    const before = await countTables(client);
    if (!force && before.instances + before.keys + before.events > 0) {
      throw new Error(
        `The store ${location} is not empty (${before.instances} instance(s), ${before.keys} key(s), ${before.events} event(s)); nothing was changed. Pass --force to replace its contents.`,
      );
    }
    await importData(client, data);
    const expected = countsOf(data);
    const found = await countTables(client);
    const wrong = (Object.keys(expected) as (keyof TableCounts)[]).filter((k) => expected[k] !== found[k]);
    if (wrong.length > 0) {
      throw new Error(
        `The copy into ${location} does not match (${wrong.map((k) => `${k}: ${expected[k]} expected, ${found[k]} found`).join('; ')}); nothing was changed.`,
      );
    }
    await client.query('COMMIT');
    return found;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
