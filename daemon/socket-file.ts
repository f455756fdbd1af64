import { lstat, stat, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname, resolve } from 'node:path';
import { SETTINGS } from '../src/config.js';
import { socketPathProblem } from '../src/config-resolve.js';
import { makeFolder, octal } from './private-home.js';

function probe(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function kind(st: Awaited<ReturnType<typeof lstat>>): string {
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isDirectory()) return 'a folder';
  if (st.isFile()) return 'a regular file';
  return 'not a socket';
}

/**
 * Makes the socket path usable: a private directory (others must not be able to swap the
 * socket), no live daemon already there, and a stale socket from a crash removed. Only a socket
 * is ever removed: `--socket <home>/db.json` used to delete the store and start empty.
 * `ownFiles` are the daemon's other files (the store and its companions), refused as a socket
 * path even before they exist.
 */
export async function prepareSocketPath(path: string, ownFiles: readonly string[] = []): Promise<void> {
  const clash = ownFiles.find((f) => resolve(f) === resolve(path));
  if (clash !== undefined) {
    throw new Error(
      `The socket path ${path} is one of ob-proxy's own files (${clash}). Give --socket a path of its own, e.g. <home>/ob-proxy.sock.`,
    );
  }
  const tooLong = socketPathProblem(path, process.platform);
  if (tooLong !== null) throw new Error(tooLong);
  const dir = dirname(path);
  await makeFolder(dir, "socket's folder", SETTINGS.socket, 'a path in a folder');
  const st = await stat(dir);
  // Whoever may write the folder may put their own socket in the daemon's place. The sticky bit
  // does not stop that: it keeps others from removing the daemon's socket, not from placing one
  // there before it is made or while it is not there (a restart).
  if ((st.mode & 0o002) !== 0) {
    throw new Error(
      `The socket directory ${dir} is writable by everyone (mode ${octal(st.mode)}). Put the socket in a private directory with --socket or --home.`,
    );
  }
  if ((st.mode & 0o020) !== 0) {
    throw new Error(
      `The socket directory ${dir} is writable by other users (its group; mode ${octal(st.mode)}${(st.mode & 0o1000) !== 0 ? ', sticky or not' : ''}): anyone in the group could replace the socket. Use a private directory (chmod 700 ${dir}; 750 to let --socket-group in) or --socket elsewhere.`,
    );
  }
  const uid = process.getuid?.();
  if (uid !== undefined && uid !== 0 && st.uid !== uid && st.uid !== 0) {
    throw new Error(
      `The socket directory ${dir} is owned by uid ${st.uid}, not by this user (${uid}) or root; its owner could replace the socket. Use a directory of your own for --socket.`,
    );
  }
  const existing = await lstat(path).catch(() => null);
  if (existing === null) return;
  if (!existing.isSocket()) {
    throw new Error(
      `The socket path ${path} exists and is ${kind(existing)}, not a socket; ob-proxy removes only a stale socket there. Give --socket a new path, or move that file away yourself.`,
    );
  }
  if (await probe(path)) {
    throw new Error(
      `Another ob-proxy daemon is already serving on ${path}. Stop it first, or give this one its own --home or --socket.`,
    );
  }
  await unlink(path);
}

/** Removes the daemon's socket at shutdown, but only if a socket is still what is there. */
export async function removeSocket(path: string): Promise<void> {
  const st = await lstat(path).catch(() => null);
  if (st?.isSocket() === true) await unlink(path).catch(() => {});
}
