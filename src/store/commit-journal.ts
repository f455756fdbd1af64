import { constants } from 'node:fs';
import { type FileHandle, lstat, open, readFile } from 'node:fs/promises';
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
  if (crc32(json).toString(16).padStart(8, '0') !== line.subarray(s1 + 1, s2).toString('latin1')) return 'its checksum does not match';
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
  /** Bytes of whole entries: anything past it is a cut-off last write, never acknowledged. */
  end: number;
  /** Bytes past `end` (a torn last line). */
  torn: number;
}

/**
 * Reads a journal file whole. Appends wait for each other's sync, so only the last line can be
 * unfinished or damaged by a crash (or be zeros a power loss left where data never landed); it
 * is dropped. A bad line with whole ones after it was not made by a crash: refused.
 */
export async function readJournal(path: string): Promise<ReadJournal | null> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path, { flag: constants.O_RDONLY | constants.O_NOFOLLOW });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw new CommitJournalError(`The store journal ${path} is a symbolic link; ob-proxy does not follow links for its own files. Replace it with the file it points to and start again.`);
    throw new CommitJournalError(`The store journal ${path} cannot be read (${code ?? (err as Error).message}). Check the permissions of the home folder.`);
  }
  const entries: JournalEntry[] = [];
  let at = 0;
  let line = 0;
  while (at < bytes.length) {
    line++;
    const nl = bytes.indexOf(0x0a, at);
    const parsed = nl < 0 ? 'unfinished' : unframe(bytes.subarray(at, nl));
    if (typeof parsed === 'string') {
      if (nl < 0 || nl === bytes.length - 1 || isZeros(bytes.subarray(nl + 1))) return { entries, end: at, torn: bytes.length - at };
      throw new CommitJournalError(
        `The store journal ${path} line ${line} is damaged (${parsed}) and has whole entries after it, which no crash leaves behind. It was left untouched: move it away to start from db.json alone (revocations still hold through the revocation journal), or restore it from a backup.`,
      );
    }
    entries.push(parsed);
    at = nl + 1;
  }
  return { entries, end: at, torn: 0 };
}

function isZeros(b: Buffer): boolean {
  for (const x of b) if (x !== 0 && x !== 0x0a) return false;
  return true;
}

/**
 * The live journal: every commit is one append, written at the end of the last whole entry and
 * synced before the commit resolves. The file is opened for each append, and must still be the
 * file this process opened first: one moved, deleted or replaced while the daemon runs fails the
 * commit ("nothing was changed") rather than acknowledging a change into a file nobody will read.
 */
export class CommitJournal {
  private constructor(readonly path: string, private readonly ino: number, private end: number) {}

  /** Opens (creating) the journal; a torn last line (past `end`) is cut off. */
  static async open(path: string, end: number): Promise<CommitJournal> {
    const fh = await openJournal(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new CommitJournalError(`The store journal ${path} is not a regular file. Move it away and start again.`);
      if (st.size !== end) {
        await fh.truncate(end);
        await fh.sync();
      }
      await syncDir(path);
      return new CommitJournal(path, st.ino, end);
    } finally {
      await fh.close();
    }
  }

  /** Bytes of whole entries in the file. */
  get size(): number {
    return this.end;
  }

  /** Appends one framed entry and syncs it; on failure the file is cut back to its last whole entry. */
  async append(line: Buffer): Promise<void> {
    const fh = await openJournal(this.path, constants.O_RDWR | constants.O_NOFOLLOW);
    let done = 0;
    try {
      const st = await fh.stat();
      if (st.ino !== this.ino || !st.isFile() || st.size < this.end) {
        throw Object.assign(new CommitJournalError(`${this.path} was moved, replaced or cut short while the daemon ran`), { code: 'EJOURNALREPLACED' });
      }
      while (done < line.length) {
        const { bytesWritten } = await fh.write(line, done, line.length - done, this.end + done);
        done += bytesWritten;
      }
      // fdatasync also makes the new size durable: the entry is read back after a power loss.
      await fh.datasync();
    } catch (err) {
      // Shrinking needs no space: a full disk still lets the cut-off entry be removed.
      if (done > 0) await fh.truncate(this.end).then(() => fh.datasync()).catch(() => {});
      throw err;
    } finally {
      await fh.close();
    }
    this.end += line.length;
  }

  /** Whether the file at the path is still this journal (before it is renamed to a segment). */
  async isIntact(): Promise<boolean> {
    const st = await lstat(this.path).catch(() => null);
    return st !== null && st.isFile() && st.ino === this.ino && st.size >= this.end;
  }
}

async function openJournal(path: string, flags: number): Promise<FileHandle> {
  try {
    return await open(path, flags, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new CommitJournalError(`The store journal ${path} is a symbolic link; ob-proxy does not follow links for its own files. Replace it with the file it points to and start again.`);
    throw Object.assign(new CommitJournalError(`The store journal ${path} cannot be opened (${code ?? (err as Error).message}). Check the permissions of the home folder.`), { code });
  }
}

export async function syncDir(path: string): Promise<void> {
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
