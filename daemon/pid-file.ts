import { constants } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { operatorFiles } from './operator-file.js';

/**
 * `--pid-file`: how a script stops what it started in the background. `$!` names npx or a shell
 * wrapper, not the process that serves, and a signal to the wrapper may leave the server running
 * (README walk-through). Written once the process serves and its signal handlers are in place, so
 * a file that exists names a process that a SIGTERM stops cleanly; replaced atomically, so a
 * reader never sees it half written.
 */
export async function writePidFile(path: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  let fh;
  try {
    fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    throw new Error(
      `Cannot write the pid file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}). Give --pid-file a path in a folder this user may write.`,
      { cause: err },
    );
  }
  try {
    await fh.writeFile(`${process.pid}\n`);
  } finally {
    await fh.close();
  }
  await rename(tmp, path).catch(async (err: unknown) => {
    await unlink(tmp).catch(() => {});
    throw new Error(`Cannot write the pid file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}).`, {
      cause: err,
    });
  });
}

/** Removes the pid file at exit, unless another process has written its own there since. */
export async function removePidFile(path: string): Promise<void> {
  // Through the bounded reader: a pipe or device put there must not hold the exit.
  const text = await operatorFiles
    .read(path, { cap: 64 })
    .then((b) => b.toString('utf8'))
    .catch(() => '');
  if (text.trim() === String(process.pid)) await unlink(path).catch(() => {});
}
