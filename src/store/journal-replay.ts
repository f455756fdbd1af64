import { readdir, rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { type JournalEntry, scanJournal } from './commit-journal-scan.js';
import type { Tables } from './store.js';

/** Where a file store's replay starts: its files, and what db.json holds. */
export interface ReplayFrom {
  /** db.json. */
  location: string;
  /** db.json.journal, the live journal; a fold's segments are `<it>.<first entry>`. */
  commitJournalPath: string;
  /** The revocation journal, named in what the operator is told. */
  journalPath: string;
  /** The last entry db.json holds. */
  through: number;
  /** Whether db.json existed: a journal that starts past entry 1 without it means it was lost. */
  existed: boolean;
  /** Reads only: a journal that does not continue db.json is not set aside. */
  readOnly: boolean;
  notice: (message: string) => void;
}

/** What the replay found: entries applied, and where the store's commits go on. */
export interface Replayed {
  applied: number;
  /** Bytes of whole entries in the live journal: appends start there. */
  liveEnd: number;
  /** Bytes of a torn last write past `liveEnd` in the live journal (zeros after it not counted). */
  liveTorn: number;
  /** The first entry in the live journal (names its segment when it is folded). */
  liveFirst: number;
  /** The number the next commit's entry gets. */
  nextN: number;
  /** Segments a fold had not finished with, waiting for a snapshot that covers them. */
  segments: string[];
}

/**
 * Applies the journal entries that follow db.json's `through`, from the segments a fold had not
 * finished with and the live journal, in order. Entries that do not continue db.json (a db.json
 * restored from an older backup after a fold) are set aside, not applied: the revocation
 * journal still keeps every revocation they hold.
 */
export async function replayCommits(tables: Tables, from: ReplayFrom): Promise<Replayed> {
  const { location, commitJournalPath, journalPath, existed } = from;
  const dir = dirname(commitJournalPath);
  const prefix = `${basename(commitJournalPath)}.`;
  const names = await readdir(dir).catch(() => [] as string[]);
  const segments = names
    .filter((n) => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length)))
    .sort((a, b) => Number(a.slice(prefix.length)) - Number(b.slice(prefix.length)))
    .map((n) => join(dir, n));
  // Applied as they are read, never all held at once: see scanJournal.
  const files: string[] = [];
  let liveEnd = 0;
  let liveTorn = 0;
  let liveFirst: number | null = null;
  const at = {
    expected: from.through + 1,
    applied: 0,
    broken: null as JournalEntry | null,
    first: null as { path: string; n: number } | null,
  };
  for (const path of [...segments, commitJournalPath]) {
    let fileFirst: number | null = null;
    const read = await scanJournal(path, (e) => {
      fileFirst ??= e.n;
      at.first ??= { path, n: e.n };
      if (at.broken !== null || e.n < at.expected) return;
      if (e.n !== at.expected) {
        at.broken = e;
        return;
      }
      for (const m of e.m) tables.apply(m);
      at.applied++;
      at.expected++;
    });
    if (read === null) continue;
    if (read.torn > 0)
      from.notice(
        `The store journal ${path} ended in a write a crash or a full disk cut off (${read.torn} bytes, never acknowledged); dropped.`,
      );
    if (path === commitJournalPath) {
      liveEnd = read.end;
      liveTorn = read.torn;
      liveFirst = fileFirst;
    }
    files.push(path);
  }
  const { expected, applied, broken, first } = at;
  let liveStart = liveFirst ?? expected;
  let kept = segments;
  if (broken !== null && !existed && first !== null && first.n > 1) {
    // Only a db.json that existed leaves a journal that starts past entry 1: it was deleted or
    // lost. Starting empty used to drop every key and instance, and set the journal aside.
    const { path, n } = first;
    throw new Error(
      `The store ${location} is missing, but its journal ${path} holds changes made after it (from entry ${n}). Nothing was changed. ` +
        `Restore ${basename(location)} from a backup (the journal is replayed over it), or, to start an empty store, move ${commitJournalPath} and ${commitJournalPath}.* away (every revocation in ${journalPath} still holds).`,
    );
  }
  if (broken !== null && !from.readOnly) {
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    for (const f of files) await rename(f, `${f}.unused-${stamp}`);
    kept = [];
    liveEnd = 0;
    liveTorn = 0;
    liveStart = expected;
    from.notice(
      `The store journal does not continue ${location} (it holds entry ${broken.n} where ${expected} was due: was db.json restored from an older backup?). ` +
        `Its files were kept aside as *.unused-${stamp} and not applied; every revocation they held is still applied from ${journalPath}.`,
    );
  }
  return { applied, liveEnd, liveTorn, liveFirst: liveStart, nextN: expected, segments: kept };
}
