import { realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

/**
 * The file store's files: the store, and the companions it keeps beside it under its own name.
 * No other path an operator gives (the socket, a backup) may name one of them: writing there
 * replaces the daemon's own state (a backup over `db.json.journal` made every later write fail
 * and the next start refuse the journal).
 */
export function storeFiles(store: string): string[] {
  return [
    store,
    `${store}.tmp`,
    `${store}.revocations`,
    `${store}.journal`,
    `${store}.audit`,
    `${store}.pid`,
    `${store}.lock`,
  ];
}

/** The path with symbolic links and `..` resolved, as far as it exists. */
async function real(path: string): Promise<string> {
  const abs = resolve(path);
  const whole = await realpath(abs).catch(() => null);
  if (whole !== null) return whole;
  const dir = await realpath(dirname(abs)).catch(() => dirname(abs));
  return join(dir, basename(abs));
}

/**
 * The store file that `path` is, after links and relative parts are resolved, or null: one of
 * storeFiles, or a segment of the commit journal (`<store>.journal.<n>`, left by a fold).
 */
export async function storeFileAt(store: string, path: string): Promise<string | null> {
  const target = await real(path);
  for (const own of storeFiles(store)) if ((await real(own)) === target) return own;
  const journal = await real(`${store}.journal`);
  if (dirname(target) === dirname(journal)) {
    const rest = basename(target).slice(basename(journal).length);
    if (basename(target).startsWith(basename(journal)) && /^\.\d+$/.test(rest))
      return join(dirname(`${store}.journal`), basename(target));
  }
  return null;
}
