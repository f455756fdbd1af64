import { constants } from 'node:fs';
import { type FileHandle, lstat, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import type { Mutation } from './store.js';

/** One committed batch: its number (consecutive, from 1) and its mutations, as given to commit. */
export interface JournalEntry {
  n: number;
  m: Mutation[];
}

export class CommitJournalError extends Error {
  override name = 'CommitJournalError';
}

/**
 * A line is `<length> <crc32> <json>\n`: the length (decimal, bytes of the JSON) and the CRC-32
 * (8 hex digits) let a reader tell a whole line from one a crash or a full disk cut off, even
 * when what is left happens to parse. The JSON is one entry; JSON.stringify never writes a raw
 * newline, so a line is an entry.
 */
export function frame(entry: JournalEntry): Buffer {
  const json = Buffer.from(JSON.stringify(entry), 'utf8');
  const head = Buffer.from(`${json.length} ${crc32(json).toString(16).padStart(8, '0')} `, 'latin1');
  return Buffer.concat([head, json, NL]);
}

const NL = Buffer.from('\n');

type Parsed = JournalEntry | string;

function unframe(line: Buffer): Parsed {
  const s1 = line.indexOf(0x20);
  const s2 = s1 < 0 ? -1 : line.indexOf(0x20, s1 + 1);
  if (s1 <= 0 || s2 !== s1 + 9) return 'no "<length> <crc32> " header';
  const len = Number(line.subarray(0, s1).toString('latin1'));
  const json = line.subarray(s2 + 1);
  if (!Number.isSafeInteger(len) || len !== json.length) return 'its length does not match';
  if (crc32(json).toString(16).padStart(8, '0') !== line.subarray(s1 + 1, s2).toString('latin1'))
    return 'its checksum does not match';
  let v: unknown;
  try {
    v = JSON.parse(json.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  const o = v as Partial<JournalEntry> | null;
  if (typeof o !== 'object' || o === null || !Number.isSafeInteger(o.n) || !Array.isArray(o.m)) return 'not an entry';
  return { n: o.n as number, m: o.m as Mutation[] };
}

export interface ReadJournal {
  entries: JournalEntry[];
  /** Bytes of whole entries: anything past it is a cut-off last write, never acknowledged, or zeros. */
  end: number;
  /** Bytes past `end` up to the last one that is not zero (a torn last line; the zeros written ahead are not counted). */
  torn: number;
}

/** Reads a journal file whole, its entries in an array: see scanJournal. */
export async function readJournal(path: string): Promise<ReadJournal | null> {
  const entries: JournalEntry[] = [];
  const read = await scanJournal(path, (e) => entries.push(e));
  return read === null ? null : { entries, ...read };
}

/**
 * Bytes read at a time. A journal is never read whole: it grows for as long as folds fail (a
 * home the store cannot write db.json into, usage flushed every few seconds), and read whole one
 * past 2 GiB refused the start ("cannot be read (ERR_FS_FILE_TOO_LARGE)"), one below that took
 * its size in memory, and its entries as objects, before the first was applied.
 */
const CHUNK = 1024 * 1024;
const ZEROS = Buffer.alloc(CHUNK);

/**
 * Reads a journal file a piece at a time, handing each entry to `onEntry` in order. Appends wait
 * for each other's sync, so only the last line can be unfinished or damaged by a crash (or be
 * zeros a power loss left where data never landed); it is dropped. The zeros written ahead of
 * the last entry (CommitJournal's reserve) are no entry. A bad line with whole ones after it was
 * not made by a crash: refused.
 */
export async function scanJournal(
  path: string,
  onEntry: (e: JournalEntry) => void,
): Promise<Omit<ReadJournal, 'entries'> | null> {
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP')
      throw new CommitJournalError(
        `The store journal ${path} is a symbolic link; ob-proxy does not follow links for its own files. Replace it with the file it points to and start again.`,
      );
    throw new CommitJournalError(
      `The store journal ${path} cannot be read (${code ?? (err as Error).message}). Check the permissions of the home folder.`,
    );
  }
  try {
    const st = await fh.stat();
    if (!st.isFile())
      throw new CommitJournalError(
        `The store journal ${path} is not a regular file. Remove it (it holds no commits) and start again.`,
      );
    const size = st.size;
    /** Where `buf` starts in the file: the start of the next line. */
    let at = 0;
    let buf = Buffer.alloc(0);
    let line = 0;
    for (;;) {
      let nl = buf.indexOf(0x0a);
      if (nl < 0) {
        // An entry never holds a zero byte: a line that does is bad, and is not read on in memory.
        const pieces: Buffer[] = [buf];
        let held = buf.length;
        let zero = buf.indexOf(0) >= 0;
        while (nl < 0 && !zero && at + held < size) {
          const more = await readAt(fh, at + held, CHUNK);
          if (more.length === 0) break;
          const k = more.indexOf(0x0a);
          if (k >= 0) nl = held + k;
          zero = more.subarray(0, k >= 0 ? k : more.length).indexOf(0) >= 0;
          pieces.push(more);
          held += more.length;
        }
        buf = Buffer.concat(pieces, held);
      }
      if (buf.length === 0) return { end: at, torn: 0 };
      line++;
      const parsed = nl < 0 ? 'unfinished' : unframe(buf.subarray(0, nl));
      if (typeof parsed === 'string') {
        const rest = await afterBadLine(fh, at, size);
        if (rest.clean) return { end: at, torn: Math.max(0, rest.contentEnd - at) };
        throw new CommitJournalError(
          `The store journal ${path} line ${line} is damaged (${parsed}) and has whole entries after it, which no crash leaves behind. It was left untouched: move it away to start from db.json alone (revocations still hold through the revocation journal), or restore it from a backup.`,
        );
      }
      onEntry(parsed);
      at += nl + 1;
      buf = buf.subarray(nl + 1);
    }
  } finally {
    await fh.close();
  }
}

async function readAt(fh: FileHandle, at: number, len: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(len);
  const { bytesRead } = await fh.read(buf, 0, len, at);
  return buf.subarray(0, bytesRead);
}

/**
 * From a bad line at `at` to the end of the file: whether only zeros and newlines follow the
 * line (a torn last write), and where the last byte that is not zero ends.
 */
async function afterBadLine(fh: FileHandle, at: number, size: number): Promise<{ clean: boolean; contentEnd: number }> {
  let lineEnd = false;
  let contentEnd = at;
  for (let pos = at; pos < size;) {
    const chunk = await readAt(fh, pos, CHUNK);
    if (chunk.length === 0) break;
    let i = 0;
    if (!lineEnd) {
      const k = chunk.indexOf(0x0a);
      lineEnd = k >= 0;
      i = k >= 0 ? k + 1 : chunk.length;
    }
    if (!isZeros(chunk.subarray(i))) return { clean: false, contentEnd };
    const last = contentEndIn(chunk);
    if (last > 0) contentEnd = pos + last;
    pos += chunk.length;
  }
  return { clean: true, contentEnd };
}

/** Only zeros and newlines. */
function isZeros(b: Buffer): boolean {
  if (b.equals(ZEROS.subarray(0, b.length))) return true;
  for (const x of b) if (x !== 0 && x !== 0x0a) return false;
  return true;
}

/** Just past the last byte that is not zero. */
function contentEndIn(b: Buffer): number {
  if (b.equals(ZEROS.subarray(0, b.length))) return 0;
  let last = b.length - 1;
  while (last >= 0 && b[last] === 0) last--;
  return last + 1;
}

/** Just past the last byte in [from, to) of the file that is not zero (`from` if none). */
async function contentEnd(fh: FileHandle, from: number, to: number): Promise<number> {
  for (let pos = to; pos > from;) {
    const len = Math.min(CHUNK, pos - from);
    const chunk = await readAt(fh, pos - len, len);
    const last = contentEndIn(chunk);
    if (last > 0) return pos - len + last;
    pos -= len;
  }
  return from;
}

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

  /** Opens (creating) the journal; a torn last line (past `end`) is overwritten with zeros. */
  static async open(path: string, end: number, reserve = 0): Promise<CommitJournal> {
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
        const junk = (await contentEnd(fh, end, size)) - end;
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
