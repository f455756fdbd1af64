import type pg from 'pg';
import type { KeyRecord } from '../../domain/key.js';
import type { Mutation, StoreChange, StoreData, StoreFeed } from '../store.js';
import type { AppliedPosition } from './daemon-heartbeat.js';
import { type Notices, errText } from './notices.js';
import type { RevocationLedger } from './revocation-ledger.js';
import { REVOCATION_PAYLOAD, type RevocationCursor, cursorParams, revocationsSince } from './revocations.js';
import type { SyncState } from './sync-state.js';

/**
 * The change feed: what other daemons commit reaches this one. A NOTIFY carrying the change
 * number wakes a read of the change log (and of ob_revocations, in the same snapshot); the
 * catch-up period reads it too, so a lost notification costs one period. Invariants:
 * - one read at a time; a wake during a read reads again once it ends;
 * - changes are delivered in order, each once: a gap in the numbers (this daemon was away longer
 *   than the log is kept) or a database that went back in time reloads the whole state instead;
 * - in sync as of when a read began: nothing committed before then is unheard.
 */

/** The channel every change and revocation is notified on. */
export const CHANNEL = 'ob_proxy_changes';
// Changes read a statement.
const PAGE = 500;

/** Where a read of the whole state left the feed: the change it includes and the revocations read. */
export interface FeedStart {
  change: number;
  /** When that change was committed, as the database said: tells a restored database. */
  changeAt: string | null;
  revocations: RevocationCursor;
}

/** What a reload needs of the store. */
export interface Reloader {
  /** Reads the whole state in one snapshot, and starts the feed there (PostgresStore.load). */
  load(): Promise<StoreData>;
  /** Revokes again, in the database and in `data`, every key this daemon knows revoked that it holds active. */
  writeBackLost(data: StoreData): Promise<void>;
}

export interface ChangeFeedDeps {
  pool: pg.Pool;
  /** This daemon's name in the change log: its own changes are skipped. */
  origin: string;
  /** The store, as it may be shown. */
  location: string;
  now: () => number;
  notices: Notices;
  ledger: RevocationLedger;
  sync: SyncState;
  /** Revocations were applied: this daemon's row should say so now. */
  applied: () => void;
  reloader: Reloader;
}

export class ChangeFeed implements AppliedPosition {
  private change = 0;
  private changeAt: string | null = null;
  /** How far ob_revocations has been read (null: not yet). */
  private cursor: RevocationCursor | null = null;
  private feed: StoreFeed | null = null;
  private pulling: Promise<void> | null = null;
  private pullAgain = false;
  private closed = false;

  constructor(private readonly deps: ChangeFeedDeps) {}

  get lastChange(): number {
    return this.change;
  }

  get revocationCursor(): RevocationCursor | null {
    return this.cursor;
  }

  /** The read under way (null: none). */
  get reading(): Promise<void> | null {
    return this.pulling;
  }

  startAt(start: FeedStart): void {
    this.change = start.change;
    this.changeAt = start.changeAt;
    this.cursor = start.revocations;
  }

  /** Delivers to `feed` from now on; reads start with the next wake. */
  follow(feed: StoreFeed): void {
    this.feed = feed;
  }

  /** A notification on the session connection: a change this daemon has not read, or a revocation. */
  notified(msg: pg.Notification): void {
    if (msg.channel === CHANNEL && (msg.payload === REVOCATION_PAYLOAD || Number(msg.payload) > this.change))
      this.wake();
  }

  /** Reads the change log now (a notification, the period, or a commit that made extras). */
  wake(): void {
    if (this.feed === null || this.closed) return;
    if (this.pulling !== null) {
      this.pullAgain = true;
      return;
    }
    this.pulling = this.pullLoop().finally(() => {
      this.pulling = null;
    });
  }

  /** Mutations of this daemon's own, heard at the change it has reached (its own changes are not read back). */
  async deliver(mutations: Mutation[]): Promise<void> {
    await this.feed?.changes([{ no: this.change, mutations }]);
  }

  /** No read after this one; the caller awaits `reading`. */
  stop(): void {
    this.closed = true;
  }

  private async pullLoop(): Promise<void> {
    const { notices, sync, location } = this.deps;
    do {
      this.pullAgain = false;
      const started = this.deps.now();
      try {
        await this.pull();
        sync.read(started);
        if (notices.last.startsWith('Cannot')) notices.say(`In sync with ${location} again.`);
      } catch (err) {
        sync.readFailed(errText(err));
        notices.say(
          `Cannot read the change log of ${location} (${errText(err)}): serving from memory; keys are refused once out of sync for longer than --max-stale.`,
        );
        return;
      }
    } while (this.pullAgain && !this.closed);
  }

  private async pull(): Promise<void> {
    for (;;) {
      // One statement, so one snapshot: a change's row and the counter commit together, so here
      // the head and the rows agree, and a gap seen is a real one (pruned), never a commit that
      // landed between two reads.
      // The revocations committed since the last read, in the same snapshot.
      const {
        rows: [page],
      } = await this.deps.pool.query<{
        head: string;
        last_at: string | null;
        changes: { no: number; at: string; origin: string; mutations: Mutation[]; extra: Mutation[] }[];
        rev_xmax: string;
        rev_xip: string[];
        revocations: KeyRecord[];
      }>(
        `SELECT (SELECT change_no FROM ob_meta WHERE id = 1) AS head,
           (SELECT at::text FROM ob_changes WHERE no = $1) AS last_at,
           coalesce((SELECT json_agg(c ORDER BY c.no) FROM
             (SELECT no, at::text AS at, origin, mutations, extra FROM ob_changes WHERE no > $1 ORDER BY no LIMIT $2) c), '[]'::json) AS changes,
           ${revocationsSince(3)}`,
        [this.change, PAGE, ...cursorParams(this.cursor)],
      );
      await this.applyRevocations(page!.revocations);
      this.cursor = { xmax: page!.rev_xmax, xip: page!.rev_xip };
      if (page!.revocations.length > 0) this.deps.applied();
      const head = Number(page!.head);
      const rows = page!.changes;
      // The database went back in time (restored from an older backup, a failover to a replica
      // that lagged, or another database): the numbers this daemon passed are being given again
      // to new changes, which reading on from its own number would skip, a revocation among them.
      if (head < this.change) {
        await this.reload(
          `its change log went back from change ${this.change} to ${head} (restored from an older backup, or another database)`,
        );
        return;
      }
      if (this.changeAt !== null && page!.last_at !== null && page!.last_at !== this.changeAt) {
        await this.reload(
          `its change ${this.change} is not the one this daemon heard (restored from an older backup, or another database)`,
        );
        return;
      }
      if (rows.length === 0) {
        if (head > this.change) await this.reload('the change log no longer holds the changes it missed');
        return;
      }
      if (Number(rows[0]!.no) !== this.change + 1) {
        await this.reload(`changes ${this.change + 1} to ${Number(rows[0]!.no) - 1} are no longer in the change log`);
        return;
      }
      const changes: StoreChange[] = [];
      let revoking = false;
      for (const r of rows) {
        for (const m of [...r.mutations, ...r.extra])
          if (m.op === 'putKey' && m.key.status === 'revoked') {
            this.deps.ledger.remember(m.key);
            revoking = true;
          }
        const mutations = r.origin === this.deps.origin ? r.extra : [...r.mutations, ...r.extra];
        if (mutations.length > 0) changes.push({ no: Number(r.no), mutations });
      }
      if (changes.length > 0) await this.feed?.changes(changes);
      const last = rows[rows.length - 1]!;
      this.change = Number(last.no);
      this.changeAt = last.at;
      // A revocation the database took only as a change is confirmed by the change number.
      if (revoking) this.deps.applied();
      if (rows.length < PAGE) return;
    }
  }

  /**
   * Revocations read from ob_revocations, applied as any revocation heard from another daemon
   * (its key's in-flight work ends within the daemon's sweep). The key.revoked audit event, with
   * its number, comes with the change that follows. A key already known revoked: nothing to do.
   */
  private async applyRevocations(records: readonly KeyRecord[]): Promise<void> {
    const fresh = this.deps.ledger.heard(records);
    if (fresh.length > 0) await this.deliver(fresh.map((key): Mutation => ({ op: 'putKey', key })));
  }

  private async reload(why: string): Promise<void> {
    this.deps.notices.say(`Reloading the whole state from ${this.deps.location}: ${why}.`);
    const before = { change: this.change, changeAt: this.changeAt };
    const data = await this.deps.reloader.load();
    try {
      await this.deps.reloader.writeBackLost(data);
    } catch (err) {
      // Not written back: the next period finds the same state and tries again.
      this.change = before.change;
      this.changeAt = before.changeAt;
      throw err;
    }
    await this.feed?.reload(data);
  }
}
