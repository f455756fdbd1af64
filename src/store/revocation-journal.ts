import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { REVOKE_REASONS, type RevokeReason } from '../domain/key.js';

/** One line of the journal: which key, bound to what, and why. A hash, never a secret. */
export interface JournalRecord {
  keyId: string;
  keyHash: string;
  instance: string;
  /** Absent only for keys of version-1 stores revoked before their upgrade. */
  deployment: string | null;
  reason: RevokeReason;
  at: string;
}

export interface JournalOptions {
  /** Zeros kept written ahead of the last record (bytes). */
  reserve?: number;
}

/** About 200 records: a whole instance's keys, revoked on a disk that has just filled up. */
export const DEFAULT_RESERVE = 64 * 1024;

const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

export class JournalError extends Error {
  override name = 'JournalError';
}

/**
 * Append-only, fsynced record of every revocation, next to the store file and outside it, so a
 * revocation outlives what db.json alone cannot: a shutdown with the store unwritable, and an
 * older db.json restored from a backup. Replayed over db.json at every start (revoked wins).
 *
 * Space is reserved ahead: the file holds zeros past its last record, written (not a sparse
 * hole) so the blocks are allocated, and a record overwrites zeros in place. On tmpfs, ext4 and
 * XFS that needs no new space, so a revocation is still recorded when the disk is full. (A
 * copy-on-write file system such as btrfs or ZFS allocates even to overwrite: there the reserve
 * does not help.) The reserve is topped up after each append, when the disk allows.
 */
export class RevocationJournal {
  /** Every revocation known to be in the file. */
  private revoked = new Map<string, JournalRecord>();
  private hashes = new Set<string>();
  /** Where the next record goes: just past the last complete record. */
  private end = 0;
  /** Bytes of a cut-off last record past `end`, overwritten (with zeros if need be) by the next. */
  private torn = 0;
  /** The file's size: the reserve is [end, size). */
  private size = 0;
  private appending: Promise<void> = Promise.resolve();
  readonly notices: string[] = [];

  private constructor(
    readonly path: string,
    private readonly reserve: number,
  ) {}

  /**
   * Creates the journal if needed, reads every record and reserves space. A line that is not a
   * record is refused (a hand edit), unless it is a write a power loss cut off (see read()).
   * The file is opened for each operation and closed again, never held: it can be moved,
   * restored or its file system remounted like any file the daemon is not using.
   */
  static async open(path: string, options: JournalOptions = {}): Promise<RevocationJournal> {
    const journal = new RevocationJournal(path, options.reserve ?? DEFAULT_RESERVE);
    try {
      const fh = await open(
        path,
        constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        0o600,
      );
      await fh.close();
      await syncDir(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw openError(path, err);
    }
    await journal.withFile(async (fh) => {
      await journal.topUp(fh).catch((err: unknown) => {
        journal.notices.push(
          `Could not reserve space in the revocation journal ${path} (${code(err)}); revocations are still recorded while the disk has room.`,
        );
      });
    });
    return journal;
  }

  /**
   * The records of a journal, read without creating, reserving or writing anything: for a backup
   * taken while no daemon runs. No file: no revocation recorded.
   */
  static async readRecords(path: string): Promise<JournalRecord[]> {
    let fh: FileHandle;
    try {
      fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw openError(path, err);
    }
    try {
      if (!(await fh.stat()).isFile()) throw new JournalError(`The revocation journal ${path} is not a regular file.`);
      const journal = new RevocationJournal(path, 0);
      await journal.read(fh);
      return journal.records();
    } finally {
      await fh.close();
    }
  }

  /**
   * Opens the file without following a link and reads it whole before anything else if it
   * changed since this process last had it: someone may have edited, replaced or restored it.
   */
  private async withFile<T>(fn: (fh: FileHandle) => Promise<T>): Promise<T> {
    let fh: FileHandle;
    try {
      fh = await open(this.path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      throw openError(this.path, err);
    }
    try {
      const st = await fh.stat();
      if (!st.isFile())
        throw new JournalError(
          `The revocation journal ${this.path} is not a regular file. Move it away (keep it if it holds revocations) and start again.`,
        );
      // Unchanged since this process last read or wrote it (same file, size and change time):
      // no need to read it again. A stop on a store of thousands of revoked keys would otherwise
      // read and parse them all.
      if (this.seen === null || !sameFile(this.seen, st)) await this.read(fh);
      this.seen = null;
      const out = await fn(fh);
      this.seen = await fh.stat();
      return out;
    } finally {
      await fh.close();
    }
  }

  /** The file as this process last left it (null: read it again). */
  private seen: Stats | null = null;

  /**
   * Every record is written with its newline, and appends wait for each other's sync: only the
   * last line can be unfinished, and zeros inside a line are pages a power loss never wrote of
   * one record. Both are skipped (never acknowledged). Zeros beside a whole record are not: no
   * write leaves a record after (or before) pages it never wrote of another, so that line, like
   * anything else malformed, was not made by a crash, and the start is refused rather than a
   * revocation dropped.
   */
  private async read(fh: FileHandle): Promise<void> {
    this.notices.length = 0;
    const bytes = await fh.readFile();
    this.size = bytes.length;
    let last = bytes.length - 1;
    while (last >= 0 && bytes[last] === 0) last--;
    const contentEnd = last + 1;
    // An unfinished last line is overwritten by the next record rather than kept behind it,
    // where it would read as a line edited by hand.
    this.end =
      contentEnd === 0 || bytes[contentEnd - 1] === 0x0a ? contentEnd : bytes.lastIndexOf(0x0a, contentEnd - 1) + 1;
    this.torn = contentEnd - this.end;
    const revoked = new Map<string, JournalRecord>();
    const hashes = new Set<string>();
    const lines = bytes.subarray(0, contentEnd).toString('utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      const record = parseRecord(line);
      if (typeof record === 'string') {
        if (line.includes('\0') && line.split(/\0+/).some((part) => typeof parseRecord(part.trim()) !== 'string'))
          throw new JournalError(
            `The revocation journal ${this.path} line ${i + 1} holds a whole revocation record beside zero bytes, which no power loss leaves. It was left untouched: delete the zero bytes of that line (keep the record: it is a revocation), or restore the journal from a backup, and start again.`,
          );
        if (line.includes('\0') || i === lines.length - 1) {
          this.notices.push(
            `The revocation journal ${this.path} line ${i + 1} was cut off (a power loss during a write never acknowledged); skipped.`,
          );
          return;
        }
        throw new JournalError(
          `The revocation journal ${this.path} line ${i + 1} is not a revocation record (${record}). It was left untouched: fix or delete that line by hand and start again.`,
        );
      }
      if (!revoked.has(record.keyId)) revoked.set(record.keyId, record);
      hashes.add(record.keyHash);
    });
    // Revocations this process recorded but the file no longer holds (replaced or cut short by
    // hand) are written again with the next append.
    this.lost = [...this.revoked.values()].filter((r) => !revoked.has(r.keyId));
    this.revoked = revoked;
    this.hashes = hashes;
  }

  private lost: JournalRecord[] = [];

  /** Every recorded revocation, one per key (the first recorded). */
  records(): JournalRecord[] {
    return [...this.revoked.values()];
  }

  has(keyId: string): boolean {
    return this.revoked.has(keyId);
  }

  hasHash(hash: string): boolean {
    return this.hashes.has(hash);
  }

  /**
   * Writes records and syncs them before resolving: once this resolves they survive a crash and
   * a power loss. Appends run one after another, so only the last can ever be cut off.
   */
  append(records: readonly JournalRecord[]): Promise<void> {
    if (records.every((r) => this.revoked.has(r.keyId))) return this.appending;
    const run = this.appending.then(() => this.withFile((fh) => this.write(fh, [...this.lost, ...records])));
    // The reserve is topped up after the append resolves, off the revocation's path; the next
    // append waits for it.
    this.appending = run.then(
      () => this.topUpLater(),
      () => {},
    );
    return run;
  }

  private async write(fh: FileHandle, all: JournalRecord[]): Promise<void> {
    const records = [...new Map(all.filter((r) => !this.revoked.has(r.keyId)).map((r) => [r.keyId, r])).values()];
    if (records.length === 0) return;
    const text = Buffer.from(records.map((r) => `${JSON.stringify(r)}\n`).join(''), 'utf8');
    const buf = text.length >= this.torn ? text : Buffer.concat([text, Buffer.alloc(this.torn - text.length)]);
    let done = 0;
    try {
      while (done < buf.length) {
        const { bytesWritten } = await fh.write(buf, done, buf.length - done, this.end + done);
        done += bytesWritten;
      }
      // Within the reserve only data changes: datasync skips the inode's times. Past it, the
      // size changes too, and that must be durable for the record to be read back.
      if (this.end + buf.length > this.size) await fh.sync();
      else await fh.datasync();
    } catch (err) {
      // A record cut off by a full disk must not stay behind as a line that reads as a hand
      // edit: zero what was written (in place, so no new space is needed).
      if (done > 0)
        await fh
          .write(Buffer.alloc(done), 0, done, this.end)
          .then(() => fh.datasync())
          .catch(() => {});
      throw err;
    }
    this.size = Math.max(this.size, this.end + buf.length);
    this.end += text.length;
    this.torn = 0;
    this.lost = [];
    for (const r of records) {
      this.revoked.set(r.keyId, r);
      this.hashes.add(r.keyHash);
    }
  }

  private async topUpLater(): Promise<void> {
    if (this.size - this.end >= this.reserve / 2) return;
    await this.withFile((fh) => this.topUp(fh)).catch(() => {});
  }

  /** Keeps at least half the reserve written ahead; best effort, a full disk only shrinks it. */
  private async topUp(fh: FileHandle): Promise<void> {
    if (this.size - this.end >= this.reserve / 2) return;
    const zeros = Buffer.alloc(this.end + this.reserve - this.size);
    let done = 0;
    try {
      while (done < zeros.length) {
        const { bytesWritten } = await fh.write(zeros, done, zeros.length - done, this.size + done);
        done += bytesWritten;
      }
    } finally {
      this.size += done;
      if (done > 0) await fh.sync();
    }
  }

  /** Waits for appends under way; nothing is held open between them. */
  async close(): Promise<void> {
    await this.appending;
  }
}

function sameFile(a: Stats, b: Stats): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;
}

function parseRecord(line: string): JournalRecord | string {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return 'not JSON';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'not an object';
  const o = v as Record<string, unknown>;
  if (typeof o.keyId !== 'string' || o.keyId === '') return 'no "keyId"';
  if (typeof o.keyHash !== 'string' || !/^[0-9a-f]{64}$/.test(o.keyHash)) return 'no "keyHash"';
  if (typeof o.instance !== 'string') return 'no "instance"';
  if (o.deployment !== null && typeof o.deployment !== 'string') return 'no "deployment"';
  if (typeof o.reason !== 'string' || !(REVOKE_REASONS as readonly string[]).includes(o.reason))
    return 'no valid "reason"';
  if (typeof o.at !== 'string' || !TIME_RE.test(o.at)) return 'no valid "at"';
  return {
    keyId: o.keyId,
    keyHash: o.keyHash,
    instance: o.instance,
    deployment: o.deployment as string | null,
    reason: o.reason as RevokeReason,
    at: o.at,
  };
}

function code(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}

function openError(path: string, err: unknown): Error {
  const c = code(err);
  if (c === 'ELOOP') {
    return new JournalError(
      `The revocation journal ${path} is a symbolic link; ob-proxy does not follow links for its own files. Replace it with the file it points to and start again.`,
    );
  }
  return new JournalError(
    `The revocation journal ${path} cannot be opened (${c}). Check the permissions of the home folder.`,
  );
}

async function syncDir(path: string): Promise<void> {
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
