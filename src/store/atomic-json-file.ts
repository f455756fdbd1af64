import { constants } from 'node:fs';
import { type FileHandle, lstat, open, readlink, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { SETTINGS } from '../config.js';
import { settingLabel } from '../config-read.js';
import { parseJsonPieces } from './json-pieces.js';

/** The store file or its temp file is something ob-proxy will not read through or write over. */
export class UnsafeStorePathError extends Error {
  readonly code = 'EUNSAFEPATH';
  override name = 'UnsafeStorePathError';
}

const CREATE_TMP = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * A JSON file whose writes survive kill -9 and power loss: write a temp file, fsync it, rename it
 * over the target, fsync the directory. A reader sees the old file or the new one, never a torn
 * one (a rename alone, without the fsyncs, can leave an empty file after a power loss).
 *
 * Neither file is reached through a symbolic link. A link at the temp path used to be followed
 * and its target overwritten with the store; a link at the store path was replaced by a plain
 * file on the first write, silently parting from its target. Both are refused instead: the store
 * is the real file at the path given.
 */
export class AtomicJsonFile<T> {
  readonly tmp: string;

  constructor(readonly path: string) {
    this.tmp = `${path}.tmp`;
  }

  async read(): Promise<T | null> {
    await this.refuseUnsafeTmp();
    let fh: FileHandle;
    try {
      fh = await open(this.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return null;
      if (code === 'ELOOP') throw await this.linkError();
      throw err;
    }
    try {
      if (!(await fh.stat()).isFile())
        throw new UnsafeStorePathError(`${this.path} is not a regular file. Point --store at the store file.`);
      // As bytes, parsed a record at a time: never one string of the whole file (json-pieces.ts).
      return parseJsonPieces(await fh.readFile()) as T;
    } finally {
      await fh.close();
    }
  }

  private async linkError(): Promise<UnsafeStorePathError> {
    const target = await readlink(this.path).catch(() => '?');
    return new UnsafeStorePathError(
      `${this.path} is a symbolic link (to ${target}). ob-proxy replaces the store file on every write, which would turn the link into a plain file and leave ${target} behind: point ${settingLabel(SETTINGS.store)} at ${target} itself, or replace the link with that file.`,
    );
  }

  /** A leftover temp file from a crash is ours to remove; anything else there is refused. */
  private async refuseUnsafeTmp(): Promise<void> {
    const st = await lstat(this.tmp).catch(() => null);
    if (st === null || st.isFile()) return;
    throw new UnsafeStorePathError(
      `${this.tmp} exists and is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a regular file'}; ob-proxy writes its temp file there and never follows or replaces such a thing. Remove it (rm ${this.tmp}) and try again.`,
    );
  }

  private async openTmp(): Promise<FileHandle> {
    try {
      return await open(this.tmp, CREATE_TMP, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // Left by a write cut off by a crash (or by a failed unlink): a regular file only.
    await this.refuseUnsafeTmp();
    await unlink(this.tmp).catch(() => {});
    return open(this.tmp, CREATE_TMP, 0o600);
  }

  async write(data: T): Promise<void> {
    await this.writeChunks([JSON.stringify(data, null, 1)]);
  }

  /**
   * Writes the file from pieces, each written as it comes: a large store is serialised a few
   * hundred records at a time, with the event loop free between them, never as one string.
   */
  async writeChunks(chunks: Iterable<string> | AsyncIterable<string>): Promise<void> {
    const fh = await this.openTmp();
    try {
      for await (const chunk of chunks) {
        const buf = Buffer.from(chunk, 'utf8');
        let done = 0;
        while (done < buf.length) done += (await fh.write(buf, done, buf.length - done)).bytesWritten;
      }
      await fh.sync();
    } catch (err) {
      await fh.close().catch(() => {});
      await unlink(this.tmp).catch(() => {});
      throw err;
    }
    await fh.close();
    // A link put at the store path while the daemon runs would be replaced by the rename.
    const st = await lstat(this.path).catch(() => null);
    if (st !== null && !st.isFile()) {
      await unlink(this.tmp).catch(() => {});
      throw st.isSymbolicLink()
        ? await this.linkError()
        : new UnsafeStorePathError(`${this.path} is not a regular file; nothing was written.`);
    }
    await rename(this.tmp, this.path);
    const dir = await open(dirname(this.path), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
