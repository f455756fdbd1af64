import { Low } from 'lowdb';
import { obError } from '../errors.js';
import { AtomicJsonFile, UnsafeStorePathError } from './atomic-json-file.js';
import { type JournalOptions, type JournalRecord, RevocationJournal } from './revocation-journal.js';
import { journalRecordOf, revokedWins } from './revoked-wins.js';
import { Tables, emptyData, type Mutation, type Store, type StoreData } from './store.js';
import { validateStoreData } from './store-validation.js';

interface Waiter {
  mutations: readonly Mutation[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface LowdbStoreOptions {
  /** Things worth an operator's attention found while loading (keys kept revoked, repairs). */
  onNotice?: (message: string) => void;
  journal?: JournalOptions;
}

/**
 * lowdb JSON file store. Commits are grouped: while one write is in flight, later commits queue
 * and go out together in the next write, so a burst of key creations costs one fsync, not many.
 *
 * Beside db.json, `db.json.revocations` (RevocationJournal) records every revocation before it
 * is acknowledged, and is replayed over db.json at every load.
 */
export class LowdbStore implements Store {
  readonly location: string;
  readonly journalPath: string;
  private readonly file: AtomicJsonFile<StoreData>;
  private readonly db: Low<StoreData>;
  private tables = new Tables();
  private queue: Waiter[] = [];
  private writing: Promise<void> | null = null;
  private journal: RevocationJournal | null = null;

  constructor(path: string, private readonly options: LowdbStoreOptions = {}) {
    this.location = path;
    this.journalPath = `${path}.revocations`;
    this.file = new AtomicJsonFile<StoreData>(path);
    this.db = new Low<StoreData>(this.file, emptyData());
  }

  private notice(message: string): void {
    this.options.onNotice?.(message);
  }

  async load(): Promise<StoreData> {
    try {
      await this.db.read();
    } catch (err) {
      if (err instanceof UnsafeStorePathError) throw new Error(`The store cannot be used: ${err.message}`, { cause: err });
      throw new Error(
        `The store ${this.location} cannot be read (${(err as Error).message}). It was left untouched; restore it from a backup or move it away to start empty.`,
        { cause: err },
      );
    }
    const data = validateStoreData(this.location, this.db.data);
    await this.journal?.close();
    this.journal = await RevocationJournal.open(this.journalPath, this.options.journal);
    for (const n of this.journal.notices) this.notice(n);
    const reconciled = revokedWins(data, this.journal.records());
    for (const n of reconciled.notices) this.notice(n);
    // Keys revoked before the journal existed: recorded now, so a backup restored later cannot
    // bring them back either. A full disk only delays this to their next write.
    await this.journal.append(reconciled.unjournaled).catch((err: unknown) => {
      this.notice(`Could not record ${reconciled.unjournaled.length} earlier revocation(s) in ${this.journalPath} (${errCode(err)}); they are in the store and are recorded with its next write.`);
    });
    // What was corrected in memory reaches db.json with the next write; until then the journal
    // and the audit trail correct it again at every load.
    this.tables = Tables.from(reconciled.data);
    return structuredClone(this.tables.toData());
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
        if (m.op === 'putKey' && m.key.status === 'revoked' && this.journal?.has(m.key.id) === false) out.push(journalRecordOf(m.key));
      }
    }
    return out;
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      // Apply to a copy: a failed write must leave the tables as they were on disk.
      const next = Tables.from(structuredClone(this.tables.toData()));
      for (const w of batch) for (const m of w.mutations) next.apply(m);
      const revocations = this.newRevocations(batch);
      try {
        // The journal first: a revocation it holds survives even if db.json cannot be written.
        if (revocations.length > 0 && this.journal !== null) {
          try {
            await this.journal.append(revocations);
          } catch (err) {
            throw Object.assign(new Error(`revocation journal: ${errCode(err)}`, { cause: err }), { code: errCode(err), journal: true });
          }
        }
        this.db.data = next.toData();
        await this.db.write();
        this.tables = next;
        for (const w of batch) w.resolve();
      } catch (err) {
        this.db.data = this.tables.toData();
        const failure = err instanceof UnsafeStorePathError
          ? obError('store_write_failed', { message: `The store ${this.location} was not written: ${err.message}`, cause: err })
          : obError('store_write_failed', {
            message: `The store ${this.location} could not be written (${errCode(err)}); nothing was changed. Check free disk space and that the home folder is writable.`,
            cause: err,
          });
        for (const w of batch) w.reject(failure);
      }
    }
    this.writing = null;
  }

  async close(): Promise<void> {
    await this.writing;
    await this.journal?.close();
    this.journal = null;
  }
}

function errCode(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? 'unknown';
}
