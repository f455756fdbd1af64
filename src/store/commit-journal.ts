import { constants } from 'node:fs';
import { type FileHandle, lstat, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { CommitJournalError, contentEnd } from './commit-journal-scan.js';

/**
 * Zeros kept written ahead of the last entry (bytes) when a store asks for them: see
 * CommitJournal. The file store's default is none (FileStoreOptions.commitReserve): with
 * zeros ahead, a disk that fills up keeps taking commits into them, which changes what a full
 * disk refuses (docs/reliability.md).
 */
export const COMMIT_RESERVE = 64 * 1024;

/**
 * The live journal: every commit is one write at the end of the last whole entry, synced before
 * the commit resolves. The file is opened for each append, and must still be the file this
 * process opened first, at the size it left it: one moved, deleted, replaced or cut short while
 * the daemon runs fails the commit ("nothing was changed") rather than acknowledging a change
 * into a file nobody will read.
 *
 * Zeros are written ahead of the last entry (`reserve`), in the background after an append
 * once less than half is left, and an entry overwrites them in place. An append then changes
 * no metadata that matters: `fdatasync` writes the data and flushes the disk's cache, without
 * committing the file system's own journal (ext4's is shared by every process writing to the
 * disk, and waiting for its commit was the tail of a commit here). The framing tells an entry
 * from the zeros, and a torn write from both.
 */
export class CommitJournal {
  /** The file's size as this process made it: [end, allocated) is zeros. */
  private allocated: number;
  /** A top-up under way, and the size it is making. */
  private topping: Promise<void> | null = null;
  private toppingTo = 0;

  private constructor(
    readonly path: string,
    private readonly ino: number,
    private end: number,
    size: number,
    private readonly reserve: number,
  ) {
    this.allocated = size;
  }

  /**
   * Opens (creating) the journal; a torn last line (past `end`) is overwritten with zeros. `torn`
   * is its length when a scan of this file under the store lock has just measured it: a journal
   * past gigabytes of reserve is then read once at start, not twice.
   */
  static async open(path: string, end: number, reserve = 0, torn?: number): Promise<CommitJournal> {
    const fh = await openJournal(
      path,
      constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
    try {
      const st = await fh.stat();
      if (!st.isFile())
        throw new CommitJournalError(`The store journal ${path} is not a regular file. Move it away and start again.`);
      let size = st.size;
      if (size > end) {
        // Zeroed in place rather than cut off: the zeros past it stay allocated for the next entries.
        const junk = torn ?? (await contentEnd(fh, end, size)) - end;
        if (junk > 0) {
          await writeAll(fh, Buffer.alloc(junk), end);
          await fh.datasync();
        }
      } else if (size < end) {
        await fh.truncate(end);
        await fh.sync();
        size = end;
      }
      await syncDir(path);
      return new CommitJournal(path, st.ino, end, size, reserve);
    } finally {
      await fh.close();
    }
  }

  /** Bytes of whole entries in the file. */
  get size(): number {
    return this.end;
  }

  /** Appends one framed entry and syncs it; on failure the file is left as it was (zeros where the entry went). */
  async append(line: Buffer): Promise<void> {
    // A top-up writes past `allocated`: an entry that would reach there waits for it.
    if (this.end + line.length > this.allocated) await this.topping;
    // Sizes the file can have now: a top-up under way may finish while the stat runs.
    const low = this.allocated;
    const high = this.topping === null ? low : this.toppingTo;
    const fh = await openJournal(this.path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    let done = 0;
    try {
      const st = await fh.stat();
      if (st.ino !== this.ino || !st.isFile() || st.size < low || st.size > high) {
        throw Object.assign(
          new CommitJournalError(`${this.path} was moved, replaced or changed while the daemon ran`),
          { code: 'EJOURNALREPLACED' },
        );
      }
      while (done < line.length) {
        const { bytesWritten } = await fh.write(line, done, line.length - done, this.end + done);
        done += bytesWritten;
      }
      // Within the zeros written ahead only data changes; past them the size changes too, which
      // fdatasync also makes durable (the entry is read back after a power loss either way).
      await fh.datasync();
    } catch (err) {
      // Neither needs new space: a full disk still lets the cut-off entry be removed.
      if (done > 0) {
        await this.undo(fh, done).catch(() => {});
        // An undo that failed leaves the file longer: its size is taken as it is, so the journal
        // is not then refused as replaced. What is left past `end` is overwritten by the next
        // entry, or read as a torn last write.
        const st = await fh.stat().catch(() => null);
        if (st?.ino === this.ino) this.allocated = Math.max(this.allocated, st.size);
      }
      throw err;
    } finally {
      await fh.close();
    }
    this.end += line.length;
    this.allocated = Math.max(this.allocated, this.end);
    if (this.allocated - this.end < this.reserve / 2 && this.topping === null) {
      this.toppingTo = this.end + this.reserve;
      this.topping = this.topUp(this.toppingTo)
        .catch(() => {})
        .finally(() => {
          this.topping = null;
        });
    }
  }

  /** Takes back the last entry, `bytes` long, appended whole (its companion write failed). */
  async retract(bytes: number): Promise<void> {
    await this.topping;
    this.end -= bytes;
    const fh = await openJournal(this.path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = await fh.stat();
      if (st.ino !== this.ino) return;
      await this.undo(fh, bytes);
    } finally {
      await fh.close();
    }
  }

  /** Zeros what an append wrote at `end`: in place within the zeros, cut off past them. */
  private async undo(fh: FileHandle, done: number): Promise<void> {
    const inPlace = Math.max(0, Math.min(done, this.allocated - this.end));
    if (inPlace > 0) await writeAll(fh, Buffer.alloc(inPlace), this.end);
    if (this.end + done > this.allocated) await fh.truncate(this.allocated);
    await fh.datasync();
  }

  /**
   * Zeros written ahead up to `to`; best effort (a full disk leaves what it took). What was
   * written counts even unsynced: an entry written over it later is synced with the size.
   */
  private async topUp(to: number): Promise<void> {
    const fh = await openJournal(this.path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = await fh.stat();
      if (st.ino !== this.ino || st.size !== this.allocated) return;
      const from = this.allocated;
      const zeros = Buffer.alloc(to - from);
      let done = 0;
      try {
        while (done < zeros.length)
          done += (await fh.write(zeros, done, zeros.length - done, from + done)).bytesWritten;
        await fh.datasync();
      } finally {
        this.allocated = from + done;
      }
    } finally {
      await fh.close();
    }
  }

  /** Waits for a top-up under way (before the file is renamed to a segment). */
  async idle(): Promise<void> {
    await this.topping;
  }

  /** Whether the file at the path is still this journal (before it is renamed to a segment). */
  async isIntact(): Promise<boolean> {
    const st = await lstat(this.path).catch(() => null);
    return st !== null && st.isFile() && st.ino === this.ino && st.size === this.allocated;
  }
}

async function writeAll(fh: FileHandle, buf: Buffer, at: number): Promise<void> {
  let done = 0;
  while (done < buf.length) done += (await fh.write(buf, done, buf.length - done, at + done)).bytesWritten;
}

async function openJournal(path: string, flags: number): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    fh = await open(path, flags, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP')
      throw new CommitJournalError(
        `The store journal ${path} is a symbolic link; ob-proxy does not follow links for its own files. Replace it with the file it points to and start again.`,
      );
    throw Object.assign(
      new CommitJournalError(
        `The store journal ${path} cannot be opened (${code ?? (err as Error).message}). Check the permissions of the home folder.`,
      ),
      { code },
    );
  }
  // O_NONBLOCK let a FIFO or device open without a writer; it is refused here, before any read.
  if (!(await fh.stat()).isFile()) {
    await fh.close();
    throw new CommitJournalError(
      `The store journal ${path} is not a regular file. Remove it (it holds no commits) and start again.`,
    );
  }
  return fh;
}

export async function syncDir(path: string): Promise<void> {
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
