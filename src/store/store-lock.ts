import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, readFile, stat, unlink } from 'node:fs/promises';
import { type Server, connect, createServer } from 'node:net';
import { basename, dirname, resolve } from 'node:path';

export interface StoreLock {
  /** The lock's name, for logs. */
  readonly name: string;
  release(): Promise<void>;
}

/** A second daemon (or a migration) on a store that another process holds. */
export class StoreLockedError extends Error {
  override name = 'StoreLockedError';
}

/**
 * What the lock needs of the process taking it (src/ reads no process globals: the daemon and the
 * CLI pass their own).
 */
export interface LockHost {
  pid: number;
  /** Linux has the abstract socket namespace; elsewhere a socket file stands for it. */
  linux: boolean;
  /** Whether a process with this pid exists (a recorded pid may be long gone). */
  exists(pid: number): boolean;
}

/** What a refusal says: why the store must not be shared, and what to do besides stopping the holder. */
export interface LockPurpose {
  why: string;
  instead: string;
}

const SERVE: LockPurpose = {
  why: "Two daemons on one store would undo each other's revocations.",
  instead: 'or give this daemon its own --home.',
};

/**
 * One writer per store. Two daemons on one db.json undo each other: a key revoked through one is
 * still served by the other, whose next write (its usage flush) puts `active` back on disk.
 *
 * The lock is a Unix socket bound in Linux's abstract namespace: binding a name is exclusive,
 * and the kernel frees it when the process dies in any way, kill -9 included, with no stale file
 * to clean up (the crash-restart suite restarts right after kill -9). Node has no flock(2); this
 * is the kernel-released lock it does have. The name derives from the store directory's device
 * and inode plus the file name, so every path to the same file (symbolic links, bind mounts)
 * meets the same lock. The holder's pid is kept in `<store>.pid` (inside the private home) for
 * the refusal message; the pid file is only a label, never the lock.
 *
 * Elsewhere than Linux a socket file `<store>.lock` does the same, with a stale one (left by a
 * crash) detected by a refused connection and replaced.
 */
export async function lockStore(storePath: string, host: LockHost, purpose: LockPurpose = SERVE): Promise<StoreLock> {
  const path = resolve(storePath);
  const dir = await stat(dirname(path));
  const digest = createHash('sha256')
    .update(`${dir.dev}:${dir.ino}/${basename(path)}`)
    .digest('hex')
    .slice(0, 32);
  const abstract = host.linux;
  const name = abstract ? `\0ob-proxy-store-${digest}` : `${path}.lock`;
  const server = createServer((c) => c.destroy());
  try {
    await listen(server, name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    if (abstract || (await alive(name))) throw await lockedError(path, digest, host, purpose);
    await unlink(name).catch(() => {});
    await listen(server, name).catch(async (again: unknown) => {
      if ((again as NodeJS.ErrnoException).code === 'EADDRINUSE') throw await lockedError(path, digest, host, purpose);
      throw again;
    });
  }
  // Never what keeps the process alive: shutdown releases it, death does too.
  server.unref();
  const pidFile = `${path}.pid`;
  await writePidFile(pidFile, host.pid);
  return {
    name: abstract ? `@ob-proxy-store-${digest}` : name,
    async release() {
      const text = await readFile(pidFile, 'utf8').catch(() => '');
      if (text.trim() === String(host.pid)) await unlink(pidFile).catch(() => {});
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

function listen(server: Server, name: string): Promise<void> {
  return new Promise((done, fail) => {
    server.once('error', fail);
    server.listen({ path: name }, () => {
      server.off('error', fail);
      done();
    });
  });
}

function alive(path: string): Promise<boolean> {
  return new Promise((done) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      done(true);
    });
    s.once('error', () => done(false));
  });
}

async function writePidFile(pidFile: string, pid: number): Promise<void> {
  let fh;
  try {
    fh = await open(pidFile, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    // The pid is only for messages; the lock holds without it.
    if ((err as NodeJS.ErrnoException).code === 'ELOOP')
      throw new Error(
        `${pidFile} is a symbolic link; ob-proxy does not follow links for its own files. Remove it and start again.`,
        { cause: err },
      );
    return;
  }
  try {
    await fh.writeFile(`${pid}\n`);
  } finally {
    await fh.close();
  }
}

async function lockedError(
  path: string,
  digest: string,
  host: LockHost,
  purpose: LockPurpose,
): Promise<StoreLockedError> {
  const recorded = Number((await readFile(`${path}.pid`, 'utf8').catch(() => '')).trim());
  const pid = Number.isSafeInteger(recorded) && recorded > 0 && host.exists(recorded) ? recorded : null;
  if (pid !== null) {
    return new StoreLockedError(
      `Another ob-proxy daemon (pid ${pid}) is already using the store ${path}. ${purpose.why} Stop it first (kill -TERM ${pid}), ${purpose.instead}`,
    );
  }
  return new StoreLockedError(
    `The store ${path} is locked by another process that did not record its pid in ${path}.pid (find it with: ss -xlp | grep ob-proxy-store-${digest}). ${purpose.why} Stop that process first, ${purpose.instead}`,
  );
}

/** The LockHost of a Node process, which the caller hands in. */
export function lockHostOf(proc: Pick<NodeJS.Process, 'pid' | 'platform' | 'kill'>): LockHost {
  return {
    pid: proc.pid,
    linux: proc.platform === 'linux',
    exists(pid) {
      try {
        proc.kill(pid, 0);
        return true;
      } catch (err) {
        return (err as NodeJS.ErrnoException).code === 'EPERM';
      }
    },
  };
}
