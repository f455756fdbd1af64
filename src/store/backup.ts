import { lstat } from 'node:fs/promises';
import { AtomicJsonFile } from './atomic-json-file.js';
import { FileStore } from './file-store.js';
import { storeFileAt } from './store-files.js';
import type { StoreData } from './store.js';

export interface BackupCounts {
  instances: number;
  keys: number;
  activeKeys: number;
  revokedKeys: number;
  events: number;
}

export function backupCounts(data: StoreData): BackupCounts {
  const active = data.keys.filter((k) => k.status === 'active').length;
  return {
    instances: data.instances.length,
    keys: data.keys.length,
    activeKeys: active,
    revokedKeys: data.keys.length - active,
    events: data.events.length,
  };
}

/**
 * A lowdb store read as a backup while no daemon holds it: db.json, the commit journal that
 * continues it, and the revocation journal folded in (revoked wins), so the copy alone never holds
 * a key as active that was revoked. Nothing is written: no journal is created, no upgrade applied
 * (the daemon that opens the restored copy migrates it forward).
 */
export async function readLowdbBackup(path: string): Promise<StoreData> {
  const there = await lstat(path).catch(() => null);
  if (there === null)
    throw new Error(
      `There is no store at ${path}: no daemon answered, and no file is there. Give --home or --store of the daemon to back up.`,
    );
  const store = new FileStore(path, { readOnly: true });
  try {
    return await store.load();
  } finally {
    await store.close();
  }
}

/**
 * Writes a backup as a store file: the restore is copying it back as db.json. Replaced
 * atomically (temp file, fsync, rename, fsync of the folder), mode 0600: it holds key hashes.
 * An existing file is replaced only when asked, and a file of the lowdb store `store` never.
 */
export async function writeBackup(
  file: string,
  data: StoreData,
  opts: { force: boolean; store?: string | undefined },
): Promise<void> {
  // Never one of the store's own files, --force or not: a backup over the commit or revocation
  // journal broke every later write and the next start.
  const own = opts.store === undefined ? null : await storeFileAt(opts.store, file);
  if (own !== null)
    throw new Error(
      `${file} is ${own === opts.store ? 'the store itself' : `one of the store's own files (${own})`}: a backup written there would replace what the daemon keeps. Give a path outside them, e.g. /var/backups/ob-proxy/db-$(date +%F).json.`,
    );
  const existing = await lstat(file).catch(() => null);
  if (existing !== null && !opts.force)
    throw new Error(`${file} already exists. Give another file, or --force to replace it.`);
  if (existing !== null && !existing.isFile())
    throw new Error(`${file} exists and is not a regular file; a backup replaces only a file.`);
  await new AtomicJsonFile<StoreData>(file).write(data);
}
