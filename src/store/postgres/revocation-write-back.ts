import { unlink } from 'node:fs/promises';
import type pg from 'pg';
import type { AuditEvent, KeyRecord, RevokeReason } from '../../domain/key.js';
import { type JournalRecord, RevocationJournal } from '../revocation-journal.js';
import { journalRecordOf } from '../revoked-wins.js';
import type { Mutation, StoreData } from '../store.js';
import { type Notices, errText } from './notices.js';
import type { RevocationLedger } from './revocation-ledger.js';
import { insertRevocations } from './revocations.js';

/**
 * Revoked wins: every revocation this daemon knows reaches the database, whatever the database
 * refused or lost. Invariants:
 * - a revocation is put into ob_revocations first, on its own; one the database refuses goes into
 *   this daemon's journal (<home>/postgres.revocations), synced before the caller acknowledges
 *   anything, so it survives a kill -9 and is written once the database takes writes;
 * - the journal holds only revocations the database has not taken: once it has them all, it is
 *   emptied; appends and that drop run one at a time;
 * - a key the database holds active though revoked is revoked in it again, as a change with its
 *   audit event, and only if still active once the change counter is taken (another daemon may
 *   have written it meanwhile);
 * - one settling at a time, every period, until nothing is pending.
 */

/** The store's one write: `decide` gives the batch once the change counter is taken; returns it. */
export type DecidedCommit = (
  decide: (client: pg.PoolClient) => Promise<readonly Mutation[]>,
) => Promise<readonly Mutation[]>;

export interface WriteBackDeps {
  pool: pg.Pool;
  /** This daemon's name in ob_revocations. */
  origin: string;
  /** The store, as it may be shown. */
  location: string;
  /** The channel every daemon listens on. */
  channel: string;
  now: () => number;
  notices: Notices;
  ledger: RevocationLedger;
  /** The journal's path (absent, `store migrate`: a revocation the database refuses lives in memory only). */
  journalPath?: string;
  commit: DecidedCommit;
  /** Hands this daemon's own audit events to its feed (its own changes are not read back). */
  deliver: (mutations: Mutation[]) => Promise<void>;
  /** What this daemon holds unwritten changed: its session's label says so (unwritten-label.ts). */
  heldChanged: () => void;
}

export class RevocationWriteBack {
  private journal: RevocationJournal | null = null;
  /** Appends and the journal's drop, one at a time. */
  private journalQueue: Promise<unknown> = Promise.resolve();
  private settling: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly deps: WriteBackDeps) {}

  /** Opens the journal, once: what it holds is applied at start, before serving. */
  async openJournal(): Promise<void> {
    if (this.journal !== null || this.deps.journalPath === undefined) return;
    this.journal = await RevocationJournal.open(this.deps.journalPath);
    for (const n of this.journal.notices) this.deps.notices.say(n);
  }

  journalRecords(): readonly JournalRecord[] {
    return this.journal?.records() ?? [];
  }

  isDurable(keyId: string): boolean {
    return this.deps.ledger.isShared(keyId) || this.journal?.has(keyId) === true;
  }

  /**
   * Puts revocations into ob_revocations, where every daemon reads them within a catch-up
   * period. Those the database does not take go into the journal. Never throws: the change that
   * follows says whether the store was written.
   */
  async share(keys: readonly KeyRecord[]): Promise<void> {
    const { ledger, notices } = this.deps;
    try {
      await insertRevocations(this.deps.pool, keys, this.deps.origin, this.deps.channel);
      for (const k of keys) {
        ledger.markShared(k.id);
        ledger.remember(k);
      }
    } catch (err) {
      for (const k of keys) ledger.markUnshared(k);
      this.deps.heldChanged();
      const journal = this.journal;
      if (journal === null) return;
      const records = keys.map(journalRecordOf);
      const appended = this.journalQueue.then(() => journal.append(records));
      this.journalQueue = appended.catch(() => {});
      await appended.catch((jerr: unknown) =>
        notices.say(
          `Could not record ${keys.length} revocation(s) in ${journal.path} (${errText(jerr)}) after ${this.deps.location} refused them (${errText(err)}): they hold in this daemon's memory until the database takes them.`,
        ),
      );
    }
  }

  /**
   * Writes what this daemon holds that the database lacks (one at a time, every period): the
   * revocations of its journal into ob_revocations, then, as a change with its audit event,
   * every revocation whose key the database holds active and no running daemon is writing (its
   * daemon restarted, or died). Then drops the journal's entries, all in ob_revocations.
   */
  settle(): void {
    if (this.settling !== null || this.closed) return;
    if (!this.deps.ledger.hasPending() && (this.journal?.records().length ?? 0) === 0) return;
    this.settling = this.settleNow()
      .catch(() => {
        // The next period tries again; the failure is the database's, said by the read or the row.
      })
      .finally(() => {
        this.settling = null;
      });
  }

  /**
   * Revoked wins, across a database that lost revocations (restored from an older backup): every
   * key this daemon knows revoked that the database holds active is revoked in it again, with
   * its audit event, before the state is applied; `data` is changed to match. The file store
   * does the same from its revocation journal.
   */
  async writeBackLost(data: StoreData): Promise<void> {
    const mutations: Mutation[] = [];
    const events: AuditEvent[] = [];
    for (const key of data.keys) {
      const r = key.status === 'active' ? this.deps.ledger.revocation(key.id) : undefined;
      if (r === undefined) continue;
      key.status = 'revoked';
      key.revokedAt = r.at;
      key.revokeReason = r.reason;
      const event = revokedEvent(key, r.at, r.reason);
      mutations.push({ op: 'putKey', key: { ...key } }, { op: 'appendEvent', event });
      events.push(event);
    }
    if (mutations.length === 0) return;
    // Another daemon reloading at the same time may have written them back first (its events
    // then reach this one by the change log).
    const written = await this.commitIfActive(
      mutations,
      events.map((e) => e.keyId!),
    );
    // Numbered by the commit, in place.
    const revokedAgain = written.flatMap((m) => (m.op === 'appendEvent' ? [m.event] : []));
    data.events.push(...revokedAgain);
    if (revokedAgain.length > 0)
      this.deps.notices.say(
        `${revokedAgain.length} key(s) revoked before were active in ${this.deps.location} (${listed(revokedAgain)}): revoked in it again.`,
      );
  }

  /** No settling after this; `close()` waits for the one under way, and closes the journal. */
  stop(): void {
    this.closed = true;
  }

  async close(): Promise<void> {
    await this.settling;
    await this.journalQueue;
    await this.journal?.close();
  }

  private async settleNow(): Promise<void> {
    const { ledger } = this.deps;
    const unshared = ledger.unsharedKeys();
    if (unshared.length > 0) {
      await insertRevocations(this.deps.pool, unshared, this.deps.origin, this.deps.channel);
      for (const k of unshared) ledger.markShared(k.id);
      this.deps.heldChanged();
    }
    const keys = ledger.writeBackKeys();
    if (keys.length > 0) {
      const written = await this.writeRevoked(keys);
      for (const k of keys) ledger.writtenBack(k.id);
      if (written.length > 0)
        this.deps.notices.say(
          `${written.length} revocation(s) the database lacked written to ${this.deps.location} (${listed(written)}).`,
        );
    }
    await this.dropJournal();
  }

  /**
   * The change that revokes keys the database may hold active, each with its audit event, which
   * this daemon hears too. Returns the events written.
   */
  private async writeRevoked(keys: readonly KeyRecord[]): Promise<AuditEvent[]> {
    const mutations: Mutation[] = [];
    for (const key of keys) {
      const event = revokedEvent(
        key,
        key.revokedAt ?? new Date(this.deps.now()).toISOString(),
        key.revokeReason ?? 'manual',
      );
      mutations.push({ op: 'putKey', key: { ...key, status: 'revoked' } }, { op: 'appendEvent', event });
    }
    const written = await this.commitIfActive(
      mutations,
      keys.map((k) => k.id),
    );
    const events = written.flatMap((m) => (m.op === 'appendEvent' ? [m.event] : []));
    // This daemon's own changes are not read back: its audit trail gets the events here.
    if (events.length > 0) await this.deps.deliver(events.map((event) => ({ op: 'appendEvent', event })));
    return events;
  }

  /**
   * Commits the mutations of the keys of `keyIds` still active once the change counter is taken
   * (no other write runs then, on any daemon). Returns those written.
   */
  private commitIfActive(mutations: readonly Mutation[], keyIds: readonly string[]): Promise<readonly Mutation[]> {
    return this.deps.commit(async (client) => {
      const { rows } = await client.query<{ id: string }>(
        "SELECT id FROM ob_keys WHERE id = ANY($1::text[]) AND status = 'active'",
        [keyIds],
      );
      const active = new Set(rows.map((r) => r.id));
      return mutations.filter((m) =>
        active.has(m.op === 'putKey' ? m.key.id : (m as { event: AuditEvent }).event.keyId!),
      );
    });
  }

  private async dropJournal(): Promise<void> {
    const journal = this.journal;
    if (journal === null) return;
    const dropped = this.journalQueue.then(async () => {
      const records = journal.records();
      if (records.length === 0 || !records.every((r) => this.deps.ledger.isShared(r.keyId))) return;
      await journal.close();
      await unlink(journal.path);
      this.journal = await RevocationJournal.open(journal.path);
    });
    this.journalQueue = dropped.catch(() => {});
    await dropped;
  }
}

/** The audit event of a key revoked by the write-back (numbered by its commit). */
function revokedEvent(key: KeyRecord, at: string, reason: RevokeReason): AuditEvent {
  return { seq: 0, at, type: 'key.revoked', instance: key.instance, keyId: key.id, keyName: key.name, reason };
}

/** The first ten keys of the events, for a notice. */
function listed(events: readonly AuditEvent[]): string {
  return `${events
    .slice(0, 10)
    .map((e) => e.keyId)
    .join(', ')}${events.length > 10 ? ', …' : ''}`;
}
