import { mkdir, stat, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname } from 'node:path';

function probe(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/**
 * Makes the socket path usable: a private directory (others must not be able to swap the
 * socket), no live daemon already there, and a stale socket from a crash removed.
 */
export async function prepareSocketPath(path: string): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await stat(dir);
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    throw new Error(`The socket directory ${dir} is writable by other users; anyone could replace the socket. Use a private directory (chmod 700 ${dir}) or --socket elsewhere.`);
  }
  if ((st.mode & 0o002) !== 0) {
    throw new Error(`The socket directory ${dir} is writable by everyone. Put the socket in a private directory with --socket or --home.`);
  }
  try {
    await stat(path);
  } catch {
    return;
  }
  if (await probe(path)) {
    throw new Error(`Another ob-proxy daemon is already serving on ${path}. Stop it first, or give this one its own --home or --socket.`);
  }
  await unlink(path);
}
