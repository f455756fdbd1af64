import { open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Adapter } from 'lowdb';

/**
 * lowdb adapter whose writes survive kill -9 and power loss: write a temp file, fsync it, rename
 * it over the target, fsync the directory. A reader sees the old file or the new one, never a torn
 * one. (lowdb's own JSONFile renames but does not fsync.)
 */
export class AtomicJsonFile<T> implements Adapter<T> {
  private readonly tmp: string;

  constructor(readonly path: string) {
    this.tmp = `${path}.tmp`;
  }

  async read(): Promise<T | null> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    return JSON.parse(text) as T;
  }

  async write(data: T): Promise<void> {
    const text = JSON.stringify(data, null, 1);
    const fh = await open(this.tmp, 'w', 0o600);
    try {
      await fh.writeFile(text, 'utf8');
      await fh.sync();
    } catch (err) {
      await fh.close().catch(() => {});
      await unlink(this.tmp).catch(() => {});
      throw err;
    }
    await fh.close();
    await rename(this.tmp, this.path);
    const dir = await open(dirname(this.path), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
