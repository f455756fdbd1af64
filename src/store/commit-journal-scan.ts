import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { crc32 } from 'node:zlib';
import type { Mutation } from './store.js';

/** The journal of commits on disk: its line format, and reading a journal file back in order. */

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
        const zeros = buf.subarray(0, nl < 0 ? buf.length : nl).indexOf(0) >= 0;
        if (zeros && rest.lineEnd >= 0 && typeof unframe(await afterLastZero(fh, at, rest.lineEnd)) !== 'string')
          throw new CommitJournalError(
            `The store journal ${path} line ${line} holds a whole entry after zero bytes, which no crash leaves (a write cut off leaves part of one entry). It was left untouched: delete the zero bytes of that line (keep the entry: it is an acknowledged commit), or restore the journal from a backup, and start again.`,
          );
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

async function readAt(fh: FileHandle, at: number, len: number, into?: Buffer): Promise<Buffer> {
  const buf = into ?? Buffer.allocUnsafe(len);
  const { bytesRead } = await fh.read(buf, 0, len, at);
  return buf.subarray(0, bytesRead);
}

/**
 * From a bad line at `at` to the end of the file: whether only zeros and newlines follow the
 * line (a torn last write), where the last byte that is not zero ends, and where the line's
 * newline is (-1: none).
 */
async function afterBadLine(
  fh: FileHandle,
  at: number,
  size: number,
): Promise<{ clean: boolean; contentEnd: number; lineEnd: number }> {
  let lineEnd = -1;
  let contentEnd = at;
  // One buffer for every read: a tail of zeros can be gigabytes, and a fresh megabyte per read
  // cost a page fault per page of it.
  const into = Buffer.allocUnsafe(CHUNK);
  for (let pos = at; pos < size;) {
    const chunk = await readAt(fh, pos, CHUNK, into);
    if (chunk.length === 0) break;
    let i = 0;
    if (lineEnd < 0) {
      const k = chunk.indexOf(0x0a);
      if (k >= 0) lineEnd = pos + k;
      i = k >= 0 ? k + 1 : chunk.length;
    }
    if (!isZeros(chunk.subarray(i))) return { clean: false, contentEnd, lineEnd };
    const last = contentEndIn(chunk);
    if (last > 0) contentEnd = pos + last;
    pos += chunk.length;
  }
  return { clean: true, contentEnd, lineEnd };
}

/**
 * The bytes of the line [at, lineEnd) after its last zero byte (none: empty), read backwards
 * from its end: what follows pages a crash never wrote, which must not be a whole entry.
 */
async function afterLastZero(fh: FileHandle, at: number, lineEnd: number): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for (let pos = lineEnd; pos > at;) {
    const len = Math.min(CHUNK, pos - at);
    const chunk = await readAt(fh, pos - len, len);
    const z = chunk.lastIndexOf(0);
    pieces.unshift(z >= 0 ? chunk.subarray(z + 1) : chunk);
    if (z >= 0) return Buffer.concat(pieces);
    pos -= len;
  }
  return Buffer.alloc(0);
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
export async function contentEnd(fh: FileHandle, from: number, to: number): Promise<number> {
  const into = Buffer.allocUnsafe(CHUNK);
  for (let pos = to; pos > from;) {
    const len = Math.min(CHUNK, pos - from);
    const chunk = await readAt(fh, pos - len, len, into);
    const last = contentEndIn(chunk);
    if (last > 0) return pos - len + last;
    pos -= len;
  }
  return from;
}
