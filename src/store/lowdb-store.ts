import { Low } from 'lowdb';
import { obError } from '../errors.js';
import { AtomicJsonFile } from './atomic-json-file.js';
import { STORE_VERSION, Tables, emptyData, type Mutation, type Store, type StoreData } from './store.js';

interface Waiter {
  mutations: readonly Mutation[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * lowdb JSON file store. Commits are grouped: while one write is in flight, later commits queue
 * and go out together in the next write, so a burst of key creations costs one fsync, not many.
 */
export class LowdbStore implements Store {
  readonly location: string;
  private readonly db: Low<StoreData>;
  private tables = new Tables();
  private queue: Waiter[] = [];
  private writing: Promise<void> | null = null;

  constructor(path: string) {
    this.location = path;
    this.db = new Low<StoreData>(new AtomicJsonFile<StoreData>(path), emptyData());
  }

  async load(): Promise<StoreData> {
    try {
      await this.db.read();
    } catch (err) {
      throw new Error(
        `The store ${this.location} cannot be read (${(err as Error).message}). It was left untouched; restore it from a backup or move it away to start empty.`,
        { cause: err },
      );
    }
    const data = this.db.data;
    if (typeof data !== 'object' || data === null || !Array.isArray(data.instances) || !Array.isArray(data.keys)) {
      throw new Error(`The store ${this.location} is not an ob-proxy store. It was left untouched.`);
    }
    if (data.version > STORE_VERSION) {
      throw new Error(`The store ${this.location} was written by a newer ob-proxy (version ${data.version}). Upgrade ob-proxy.`);
    }
    data.events ??= [];
    this.tables = Tables.from(data);
    return structuredClone(this.tables.toData());
  }

  commit(mutations: readonly Mutation[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ mutations, resolve, reject });
      this.writing ??= this.drain();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      // Apply to a copy: a failed write must leave the tables as they were on disk.
      const next = Tables.from(structuredClone(this.tables.toData()));
      for (const w of batch) for (const m of w.mutations) next.apply(m);
      try {
        this.db.data = next.toData();
        await this.db.write();
        this.tables = next;
        for (const w of batch) w.resolve();
      } catch (err) {
        this.db.data = this.tables.toData();
        const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
        const failure = obError('store_write_failed', {
          message: `The store ${this.location} could not be written (${code}); nothing was changed. Check free disk space and that the home folder is writable.`,
          cause: err,
        });
        for (const w of batch) w.reject(failure);
      }
    }
    this.writing = null;
  }

  async close(): Promise<void> {
    await this.writing;
  }
}
