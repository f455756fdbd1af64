import { rename, unlink } from 'node:fs/promises';
import { basename } from 'node:path';
import { obError } from '../errors.js';
import type { AuditEvent } from '../domain/key.js';
import { AtomicJsonFile, UnsafeStorePathError } from './atomic-json-file.js';
import { AuditArchive, DEFAULT_AUDIT_KEEP } from './audit-archive.js';
import { CommitJournal } from './commit-journal.js';
import { frame } from './commit-journal-scan.js';
import { cloneData } from './clone-data.js';
import { replayCommits } from './journal-replay.js';
import { type JournalOptions, type JournalRecord, RevocationJournal } from './revocation-journal.js';
import { journalRecordOf, revokedWins } from './revoked-wins.js';
import { type SnapshotMeta, readSnapshotMeta, snapshotChunks } from './snapshot.js';
import { type UsageBucket, rollUpHours } from '../domain/usage-buckets.js';
import {
  type AuditQuery,
  type BucketQuery,
  Tables,
  emptyData,
  type Mutation,
  type Store,
  type StoreData,
} from './store.js';
import { validateStoreData } from './store-validation.js';

interface Waiter {
  mutations: readonly Mutation[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface FileStoreOptions {
  /** Things worth an operator's attention found while loading (keys kept revoked, repairs). */
  onNotice?: (message: string) => void;
  journal?: JournalOptions;
  /**
   * Fold the commit journal into db.json once it holds this many bytes. Default: db.json's own
   * size, at least 1 MiB, so the time spent rewriting db.json stays a fixed share of the time
   * spent committing, whatever the store's size.
   */
  foldBytes?: number;
  /** Audit events db.json keeps; older ones move to `<store>.audit` (default 10,000). */
  auditKeep?: number;
  /**
   * Zeros written ahead in the journal of commits (bytes; default none, COMMIT_RESERVE is the
   * measured setting). An append into them changes no file metadata, so its fdatasync commits
   * no file-system journal; but a disk that fills up then still takes commits into them.
   */
  commitReserve?: number;
  /** Reads the store (journal included) and writes nothing of its own: `store migrate`. */
  readOnly?: boolean;
  /** The clock (ms) that says which hours of usage are old enough to roll up into days. */
  now?: () => number;
}

/** Below this the journal is never folded during a run (a fold rewrites all of db.json). */
const MIN_FOLD_BYTES = 1024 * 1024;

/**
 * The JSON file store: `db.json`, a snapshot, plus `db.json.journal`, every commit since that
 * snapshot, appended and synced (one small write per commit, whatever the store's size). Once the
 * journal passes a size it is folded into a fresh db.json in the background: the journal is
 * renamed to a segment (`db.json.journal.<first entry>`), commits go on into a new one, db.json is
 * replaced atomically from the tables as they were at the rename, then the segment is deleted. At
 * load, db.json and the entries after its `through` are replayed; at a clean close the journal is
 * folded, so a stopped daemon leaves a complete db.json.
 *
 * Commits are grouped: while one append is in flight, later commits queue and go out together in
 * the next, so a burst of key creations costs one fsync, not many.
 *
 * Beside them, `db.json.revocations` (RevocationJournal) records every revocation before it is
 * acknowledged and is replayed over db.json at every load; it is never folded, so no backup of
 * db.json restored later can revive a revoked key.
 */
/** Keys past which a JSON store says it has outgrown itself (it still loads, up to a few GiB). */
export const OUTGROWN_KEYS = 250_000;

export class FileStore implements Store {
  readonly location: string;
  readonly journalPath: string;
  readonly commitJournalPath: string;
  private readonly file: AtomicJsonFile<unknown>;
  private readonly archive: AuditArchive;
  private tables = new Tables();
  private meta: SnapshotMeta = { through: 0, auditArchived: null };
  private queue: Waiter[] = [];
  private writing: Promise<void> | null = null;
  private journal: RevocationJournal | null = null;
  private log: CommitJournal | null = null;
  /** The number the next commit's entry gets. */
  private nextN = 1;
  /** The first entry in the live journal file (names its segment when it is folded). */
  private liveFirst = 1;
  /** Segments waiting for a snapshot that covers them. */
  private segments: string[] = [];
  private folding: Promise<void> | null = null;
  private snapshotBytes = 0;
  /** Journal size at which the next fold starts (pushed on after a failed one). */
  private foldAt = MIN_FOLD_BYTES;

  constructor(
    path: string,
    private readonly options: FileStoreOptions = {},
  ) {
    this.location = path;
    this.journalPath = `${path}.revocations`;
    this.commitJournalPath = `${path}.journal`;
    this.file = new AtomicJsonFile<unknown>(path);
    this.archive = new AuditArchive(`${path}.audit`);
  }

  private notice(message: string): void {
    this.options.onNotice?.(message);
  }

  async load(): Promise<StoreData> {
    let raw: unknown;
    try {
      raw = await this.file.read();
    } catch (err) {
      if (err instanceof UnsafeStorePathError)
        throw new Error(`The store cannot be used: ${err.message}`, { cause: err });
      throw new Error(
        `The store ${this.location} cannot be read (${(err as Error).message}). It was left untouched; restore it from a backup or move it away to start empty.`,
        { cause: err },
      );
    }
    const existed = raw !== null;
    const snapshot = validateStoreData(this.location, raw ?? emptyData());
    if (snapshot.keys.length >= OUTGROWN_KEYS)
      this.notice(
        `The store ${this.location} holds ${snapshot.keys.length} keys: a JSON store is read whole at start and rewritten whole as it grows, so start-up time and memory follow its size. Move it to PostgreSQL before it grows further: ob-proxy store migrate --from ${this.location} --to postgres://… (docs/scale-out.md).`,
      );
    this.meta = readSnapshotMeta(this.location, raw);
    let tables = Tables.from(snapshot);
    const replay = await replayCommits(tables, {
      location: this.location,
      commitJournalPath: this.commitJournalPath,
      journalPath: this.journalPath,
      through: this.meta.through,
      existed,
      readOnly: this.options.readOnly === true,
      notice: (m) => this.notice(m),
    });
    this.liveFirst = replay.liveFirst;
    this.nextN = replay.nextN;
    this.segments = replay.segments;
    if (replay.applied > 0) {
      // The journal was written by this code, but its result is checked like a file edited by hand.
      tables = Tables.from(validateStoreData(`${this.location} (with ${this.commitJournalPath})`, tables.toData()));
    }

    if (this.options.readOnly === true) {
      // A copy or a migration: the revocations are read, nothing is created or reserved.
      const reconciled = revokedWins(
        tables.toData(),
        await RevocationJournal.readRecords(this.journalPath),
        this.meta.auditArchived?.at ?? null,
      );
      for (const n of reconciled.notices) this.notice(n);
      this.tables = Tables.from(reconciled.data);
      return cloneData(this.tables.toData());
    }
    await this.journal?.close();
    this.journal = await RevocationJournal.open(this.journalPath, this.options.journal);
    for (const n of this.journal.notices) this.notice(n);
    if (!existed && replay.applied === 0 && this.journal.records().length > 0) {
      // Keys were revoked in a store that is gone: db.json was deleted or lost after a clean
      // stop (its commit journal is folded and empty then). Starting empty dropped every
      // instance and key.
      const n = this.journal.records().length;
      await this.journal.close();
      this.journal = null;
      throw new Error(
        `The store ${this.location} is missing, but ${this.journalPath} records ${n} revocation(s) of keys it held: it was deleted or lost. Nothing was changed. ` +
          `Restore ${basename(this.location)} from a backup (the revocations are applied over it), or, to start an empty store on purpose, rename ${this.journalPath} to keep it (a backup restored beside it later needs it).`,
      );
    }
    const reconciled = revokedWins(tables.toData(), this.journal.records(), this.meta.auditArchived?.at ?? null);
    for (const n of reconciled.notices) this.notice(n);
    // Keys revoked before the journal existed: recorded now, so a backup restored later cannot
    // bring them back either. A full disk only delays this to their next write.
    await this.journal.append(reconciled.unjournaled).catch((err: unknown) => {
      this.notice(
        `Could not record ${reconciled.unjournaled.length} earlier revocation(s) in ${this.journalPath} (${errCode(err)}); they are in the store and are recorded with its next write.`,
      );
    });
    // The tables take what the check changed, not a second map of every key.
    for (const k of reconciled.changed) tables.keys.set(k.id, k);
    tables.events = reconciled.data.events;
    this.tables = tables;

    this.log = await CommitJournal.open(
      this.commitJournalPath,
      replay.liveEnd,
      this.options.commitReserve,
      replay.liveTorn,
    );
    // What was corrected in memory, and what the journal added, go to a new db.json: a store
    // that was not closed cleanly starts from a complete db.json again. The write goes on in the
    // background, as every fold does (a million keys is most of a minute of writing and syncing
    // on a first start): until it is done, the segments it covers are replayed at a load.
    const keep = Math.max(1, this.options.auditKeep ?? DEFAULT_AUDIT_KEEP);
    if (
      !existed ||
      replay.applied > 0 ||
      this.segments.length > 0 ||
      this.log.size > 0 ||
      this.tables.events.length > keep
    ) {
      await this.folding;
      await this.beginFold();
      // A new store's file exists once it is open: it is a few bytes.
      if (!existed) await this.folding;
    }
    // The audit events db.json keeps, not those the fold archives.
    const data = this.tables.toData();
    return cloneData({ ...data, events: data.events.slice(-keep) });
  }

  /** Resolves once no fold is writing db.json (the load's included). */
  async folded(): Promise<void> {
    while (this.folding !== null) await this.folding;
  }

  async auditEvents(q: AuditQuery): Promise<readonly Readonly<AuditEvent>[]> {
    return this.tables.auditEvents(q);
  }

  async usageBuckets(q: BucketQuery): Promise<UsageBucket[]> {
    return this.tables.bucketsIn(q);
  }

  /** True once the revocation of this key survives a restart, whatever db.json holds. */
  isRevocationDurable(keyId: string): boolean {
    return this.journal?.has(keyId) ?? false;
  }

  commit(mutations: readonly Mutation[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ mutations, resolve, reject });
      this.writing ??= this.drain();
    });
  }

  /** Revocations in a batch that the journal does not hold yet. */
  private newRevocations(batch: readonly Waiter[]): JournalRecord[] {
    const out: JournalRecord[] = [];
    for (const w of batch) {
      for (const m of w.mutations) {
        if (m.op === 'putKey' && m.key.status === 'revoked' && this.journal?.has(m.key.id) === false)
          out.push(journalRecordOf(m.key));
      }
    }
    return out;
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      // Taken now: callers may change their objects once they hold the promise.
      const mutations = structuredClone(batch.flatMap((w) => w.mutations));
      const line = frame({ n: this.nextN, m: mutations });
      const revocations = this.newRevocations(batch);
      try {
        const log = this.log;
        if (log === null) throw Object.assign(new Error('the store is closed'), { code: 'ECLOSED' });
        if (log.size === 0) this.liveFirst = this.nextN;
        // Both journals are written and synced at once: one sync's wait, not two in a row. A
        // crash may then leave the commit without the revocation record, never the reverse
        // harm: the next load records every revoked key the store holds and the journal does
        // not (revokedWins' `unjournaled`). A revocation the journal refused is not committed
        // either (taken back), so the failure reads as before: nothing was changed.
        const [rev, commit] = await Promise.allSettled([
          revocations.length > 0 && this.journal !== null ? this.journal.append(revocations) : undefined,
          log.append(line),
        ]);
        if (rev.status === 'rejected') {
          if (commit.status === 'fulfilled') await log.retract(line.length).catch(() => {});
          throw Object.assign(new Error(`revocation journal: ${errCode(rev.reason)}`, { cause: rev.reason }), {
            code: errCode(rev.reason),
            journal: true,
          });
        }
        if (commit.status === 'rejected') throw commit.reason;
        this.nextN++;
        for (const m of mutations) this.tables.apply(m);
        for (const w of batch) w.resolve();
      } catch (err) {
        const failure =
          err instanceof UnsafeStorePathError
            ? obError('store_write_failed', {
                message: `The store ${this.location} was not written: ${err.message}`,
                cause: err,
              })
            : obError('store_write_failed', {
                message: `The store ${this.location} could not be written (${errCode(err)}); nothing was changed. Check free disk space and that the home folder is writable.`,
                cause: err,
              });
        for (const w of batch) w.reject(failure);
      }
      // Between batches, so no append can land in the file being renamed; the commits that
      // queued meanwhile wait only for the rename.
      if (this.folding === null && this.log !== null && this.log.size >= this.foldAt) await this.beginFold();
    }
    this.writing = null;
  }

  /** A whole fold, awaited (at load and close). */
  private async fold(): Promise<void> {
    await this.folding;
    await this.beginFold();
    await this.folding;
  }

  /**
   * Turns the live journal into a segment, then writes db.json from the tables as they are at
   * that moment in the background of later commits (`folding`), and deletes the segments it
   * covers. A failure leaves the segments in place (still replayed at load); it is tried again later.
   */
  private async beginFold(): Promise<void> {
    try {
      await this.switchJournal();
    } catch (err) {
      this.foldFailed(err);
      return;
    }
    this.folding = this.writeSnapshot()
      .catch((err: unknown) => this.foldFailed(err))
      .finally(() => {
        this.folding = null;
      });
  }

  private async writeSnapshot(): Promise<void> {
    // Taken before the first await. The records are never changed in place (Tables replaces
    // them), so these references are the state at `through` however long the write takes.
    const through = this.nextN - 1;
    const segments = [...this.segments];
    const instances = [...this.tables.instances.values()];
    const keys = [...this.tables.keys.values()];
    const models = this.tables.models;
    // Hours older than a week become their day: a key's hours stay bounded.
    rollUpHours(this.tables.buckets, (this.options.now ?? Date.now)());
    const buckets = [...this.tables.buckets.values()];
    const len = this.tables.events.length;
    const keep = Math.max(1, this.options.auditKeep ?? DEFAULT_AUDIT_KEEP);
    const older = this.tables.events.slice(0, Math.max(0, len - keep));
    const kept = this.tables.events.slice(older.length, len);

    let auditArchived = this.meta.auditArchived;
    if (older.length > 0) {
      await this.archive.append(older, auditArchived?.seq ?? 0);
      const lastOld = older[older.length - 1]!;
      auditArchived = { seq: lastOld.seq, at: lastOld.at };
    }
    const meta: SnapshotMeta = { through, auditArchived };
    const chunks = snapshotChunks({ meta, instances, keys, events: kept, models, buckets });
    await this.file.writeChunks(chunks);
    this.meta = meta;
    this.snapshotBytes = chunks.bytes();
    // Events appended meanwhile are after `len`; only the archived ones leave memory.
    if (older.length > 0) this.tables.events.splice(0, older.length);
    for (const s of segments) await unlink(s).catch(() => {});
    this.segments = this.segments.filter((s) => !segments.includes(s));
    this.foldAt = this.options.foldBytes ?? Math.max(MIN_FOLD_BYTES, this.snapshotBytes);
  }

  private async switchJournal(): Promise<void> {
    if (this.log === null || this.log.size === 0) return;
    const segment = `${this.commitJournalPath}.${this.liveFirst}`;
    // Never a file put in its place: only what this process wrote is folded and deleted.
    await this.log.idle();
    if (!(await this.log.isIntact()))
      throw Object.assign(new Error(`${this.commitJournalPath} was moved or replaced`), { code: 'EJOURNALREPLACED' });
    await rename(this.commitJournalPath, segment);
    let log: CommitJournal;
    try {
      // A new, empty file (open syncs the folder, so the rename is durable too).
      log = await CommitJournal.open(this.commitJournalPath, 0, this.options.commitReserve);
    } catch (err) {
      // No new file (no inode left, too many open files): the segment goes back to being the
      // live journal, so commits go on into it. Left renamed, every commit failed (ENOENT),
      // even once the disk had room again, until a restart.
      await rename(segment, this.commitJournalPath).catch(() => this.segments.push(segment));
      throw err;
    }
    this.segments.push(segment);
    this.log = log;
    this.liveFirst = this.nextN;
  }

  private foldFailed(err: unknown): void {
    // Nothing is lost: the journal still holds every commit. Tried again once it has grown more.
    this.foldAt = (this.log?.size ?? 0) + (this.options.foldBytes ?? Math.max(MIN_FOLD_BYTES, this.snapshotBytes));
    const why = err instanceof UnsafeStorePathError ? err.message : `${errCode(err)}; check free disk space`;
    this.notice(
      `Could not fold the store journal into ${this.location} (${why}). Every change is kept in the journal; the fold is tried again later.`,
    );
  }

  async close(): Promise<void> {
    await this.writing;
    await this.folding;
    if (this.log !== null && (this.log.size > 0 || this.segments.length > 0)) await this.fold();
    this.log = null;
    await this.journal?.close();
    this.journal = null;
  }
}

function errCode(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}
