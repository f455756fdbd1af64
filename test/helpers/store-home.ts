/**
 * Helpers for the store's tests: a ready instance made through the real CLI, the store file
 * read and edited by hand as an operator would, and a small tmpfs for a real full disk.
 */
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cliJson } from './processes.js';

export const MODEL = 'gemma4:26b';

/** `instances add` + `instances ready` through the CLI; the default key's id and secret. */
export async function readyInstance(
  home: string,
  id: string,
  endpoint: string,
): Promise<{ keyId: string; secret: string }> {
  await cliJson(['instances', 'add', id, '--model', MODEL, '--endpoint', endpoint], home);
  const ready = await cliJson<{ defaultKey: { id: string; secret: string } }>(['instances', 'ready', id], home);
  return { keyId: ready.defaultKey.id, secret: ready.defaultKey.secret };
}

export interface StoreFile {
  version: number;
  instances: Record<string, unknown>[];
  keys: Record<string, unknown>[];
  events: Record<string, unknown>[];
}

export async function readStore(home: string): Promise<StoreFile> {
  return JSON.parse(await readFile(join(home, 'db.json'), 'utf8')) as StoreFile;
}

export async function writeStore(home: string, data: unknown): Promise<void> {
  await writeFile(join(home, 'db.json'), typeof data === 'string' ? data : JSON.stringify(data, null, 1));
}

export function chat(content = 'hi'): Record<string, unknown> {
  return { model: MODEL, messages: [{ role: 'user', content }] };
}

/** A tmpfs of `size` at `dir`, when this process may mount (root with CAP_SYS_ADMIN). */
export function mountTmpfs(dir: string, size = '1m'): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function unmount(dir: string): void {
  execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
}
