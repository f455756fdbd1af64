import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import type { AuditEvent } from '../domain/key.js';
import { syncDir } from './commit-journal.js';

/** Events db.json keeps; older ones move to the archive when the journal is folded. */
export const DEFAULT_AUDIT_KEEP = 10_000;

/** How much of the archive's end is read to find the last event it holds. */
const TAIL_BYTES = 64 * 1024;

/**
 * `db.json.audit`: the audit trail's older events, one JSON object a line, oldest first,
 * append-only. Written before the db.json that no longer holds them, so a crash in between
 * leaves an event in both places (the next fold finds it by its number and does not add it
 * again), never in neither.
 */
/**
 * Events serialised and written at a time: a few milliseconds of JSON, since every piece holds
 * the daemon's requests while it is made (10,000 held them 17 to 26 ms).
 */
const ARCHIVE_PIECE = 2_000;

export class AuditArchive {
  constructor(readonly path: string) {}

  /** Appends the events the archive does not hold yet and syncs; returns the highest number held. */
  async append(events: readonly AuditEvent[], heldThrough: number): Promise<number> {
    const fh = await open(
      this.path,
      constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      0o600,
    );
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new Error(`${this.path} is not a regular file`);
      const { end, lastSeq } = await tail(fh, st.size);
      const from = Math.max(heldThrough, lastSeq);
      const first = firstAfter(events, from);
      if (first === events.length) return from;
      // A piece at a time: the events of a large store's first fold (a million and more) made one
      // string of hundreds of MB.
      let at = end;
      for (let i = first; i < events.length; i += ARCHIVE_PIECE) {
        const buf = Buffer.from(
          events
            .slice(i, i + ARCHIVE_PIECE)
            .map((e) => `${JSON.stringify(e)}\n`)
            .join(''),
          'utf8',
        );
        let done = 0;
        while (done < buf.length) done += (await fh.write(buf, done, buf.length - done, at + done)).bytesWritten;
        at += buf.length;
      }
      if (at < st.size) await fh.truncate(at);
      await fh.sync();
      if (st.size === 0) await syncDir(this.path);
      return events[events.length - 1]!.seq;
    } finally {
      await fh.close();
    }
  }
}

/**
 * The index of the first event numbered above `seq` (events.length: none), by bisection: the
 * events are in the order of their numbers, and a scan of a million of them held the loop.
 */
function firstAfter(events: readonly AuditEvent[], seq: number): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (events[mid]!.seq > seq) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Where the last whole line ends, and the number of the event on it (0 if none). */
async function tail(fh: FileHandle, size: number): Promise<{ end: number; lastSeq: number }> {
  if (size === 0) return { end: 0, lastSeq: 0 };
  const len = Math.min(size, TAIL_BYTES);
  const buf = Buffer.alloc(len);
  await fh.read(buf, 0, len, size - len);
  // A line cut off by a crash is overwritten by the next append.
  const lastNl = buf.lastIndexOf(0x0a);
  if (lastNl < 0) return { end: size - len, lastSeq: 0 };
  const end = size - len + lastNl + 1;
  const prevNl = buf.lastIndexOf(0x0a, lastNl - 1);
  try {
    const e = JSON.parse(buf.subarray(prevNl + 1, lastNl).toString('utf8')) as { seq?: unknown };
    return { end, lastSeq: typeof e.seq === 'number' ? e.seq : 0 };
  } catch {
    return { end, lastSeq: 0 };
  }
}
