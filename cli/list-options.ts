import type { Command } from 'commander';
import { printableJsonText } from '../src/printable.js';
import type { Io } from './output.js';
import { UsageError } from './usage-error.js';

/** Rows a list command shows when no page is asked for: a small store's whole list, a large one's first page. */
export const FIRST_PAGE = 1000;

/** The largest page the daemon answers with. */
const MAX_PAGE = 10_000;

export interface PageFlags {
  limit?: string;
  after?: string;
  all?: boolean;
  json?: boolean;
}

export function withPageOptions(cmd: Command, what: string): Command {
  return cmd
    .option('--limit <n>', `at most this many ${what} (a page, 1 to ${MAX_PAGE}; ${FIRST_PAGE} by default)`)
    .option('--after <key-id>', 'the page after this key (the next cursor the page before printed)')
    .option('--all', `every ${what}, one JSON line each, written as the daemon sends them`);
}

/** The page asked for; null: the whole list (--all, or --json without --limit or --after). */
export function pageOf(o: PageFlags): { limit: number; after: string | undefined } | null {
  if (o.all === true) {
    if (o.limit !== undefined || o.after !== undefined)
      throw new UsageError('--all lists everything: give it without --limit or --after.');
    return null;
  }
  if (o.limit === undefined && o.after === undefined && o.json === true) return null;
  const limit = o.limit === undefined ? FIRST_PAGE : Number(o.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
    throw new UsageError(`--limit must be a whole number from 1 to ${MAX_PAGE}, got "${o.limit}".`);
  return { limit, after: o.after };
}

/** A JSON line from the daemon, printed as it came with every string safe for a terminal. */
export function lineOut(io: Io): (line: string) => void {
  return (line) => io.out(`${printableJsonText(line)}\n`);
}

/** The line under a page that has more after it. */
export function nextLine(command: string, next: string | null, limit: number, shownCount: number): string {
  if (next === null) return '';
  const more = limit === FIRST_PAGE ? '' : ` --limit ${limit}`;
  return `Showed ${shownCount}; more after them: ${command} --after ${next}${more} (or --all for every one).\n`;
}
