import type pg from 'pg';
import { ObProxyError, obError } from '../../errors.js';
import type { Mutation } from '../store.js';
import { applyBatch } from './apply.js';
import { errText } from './notices.js';

/**
 * One write to the store, as a numbered change in the change log. Invariants: the change counter
 * row is taken first, so writes are serialised across every daemon and a change's number is
 * given once; the change's row, its effects on the tables and its notification commit together
 * or not at all; a failure is `store_write_failed` (or the ObProxyError the batch met), and
 * changed nothing.
 */

export interface ChangeWriter {
  writers: pg.Pool;
  /** This daemon's name in the change log. */
  origin: string;
  /** The store, as it may be shown. */
  location: string;
  /** The channel every daemon listens on. */
  channel: string;
  now: () => number;
}

/** What a change wrote: the batch, and what the store did on the writer's behalf (heard by the feed). */
export interface CommittedChange {
  mutations: readonly Mutation[];
  extra: readonly Mutation[];
}

/**
 * `decide` gives the batch once the counter is taken (no other write runs, on any daemon), so it
 * may look at the rows first; an empty batch writes nothing.
 */
export async function commitChange(
  w: ChangeWriter,
  decide: (client: pg.PoolClient) => Promise<readonly Mutation[]>,
): Promise<CommittedChange> {
  let client: pg.PoolClient | undefined;
  try {
    client = await w.writers.connect();
    await client.query('BEGIN');
    // The counter first: it serialises every write, on every daemon (migrations.ts).
    const { rows } = await client.query<{ change_no: string }>(
      'UPDATE ob_meta SET change_no = change_no + 1 WHERE id = 1 RETURNING change_no',
    );
    const no = Number(rows[0]!.change_no);
    const mutations = await decide(client);
    if (mutations.length === 0) {
      await client.query('ROLLBACK');
      client.release();
      return { mutations, extra: [] };
    }
    const applied = await applyBatch(client, mutations, new Date(w.now()).toISOString());
    // The change and its notification in one statement: the counter row is held for as few
    // round trips as can be. Delivered at commit, to every listening daemon (this one too: it
    // reads back the extras).
    await client.query(
      'WITH c AS (INSERT INTO ob_changes (no, origin, mutations, extra) VALUES ($1, $2, $3, $4)) SELECT pg_notify($5, $1::text)',
      [no, w.origin, JSON.stringify(applied.mutations), JSON.stringify(applied.extra), w.channel],
    );
    await client.query('COMMIT');
    client.release();
    client = undefined;
    return { mutations, extra: applied.extra };
  } catch (err) {
    if (client !== undefined) {
      await client.query('ROLLBACK').catch(() => {});
      client.release(err instanceof ObProxyError ? undefined : (err as Error));
    }
    if (err instanceof ObProxyError) throw err;
    throw obError('store_write_failed', {
      message: `The store ${w.location} could not be written (${errText(err)}); nothing was changed. Check that PostgreSQL is running and reachable.`,
      cause: err,
    });
  }
}
