import { chmod, lstat, mkdir, readlink, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { SETTINGS, type Setting } from '../src/config.js';
import { settingLabel } from '../src/config-read.js';

/**
 * mkdir -p, with a refusal that says what is in the way. Node's own error names only the errno
 * and one path ("EEXIST: file already exists, mkdir '/srv/ob'"), and for a home on a volume that
 * is not mounted (a symbolic link to nowhere) it said ENOENT about a path `ls` shows.
 */
export async function makeFolder(path: string, what: string, setting: Setting, wanted = 'a folder'): Promise<void> {
  try {
    await mkdir(path, { recursive: true, mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const cause = await inTheWay(resolve(path));
    const why =
      cause ??
      (code === 'EACCES' || code === 'EPERM'
        ? 'this user may not create it'
        : code === 'EROFS'
          ? 'it is on a read-only file system'
          : (code ?? (err as Error).message));
    const message = `The ${what} ${path} cannot be made: ${why}. Give ${settingLabel(setting)} ${wanted} ob-proxy can use.`;
    throw new Error(message, { cause: err });
  }
}

/** The first part of `path` that is not a folder: a file, or a symbolic link to nothing. */
async function inTheWay(path: string): Promise<string | null> {
  for (let p = path; ; p = dirname(p)) {
    const link = await lstat(p).catch(() => null);
    if (link !== null) {
      const st = await stat(p).catch(() => null);
      if (st === null) {
        const target = await readlink(p).catch(() => '?');
        return `${p} is a symbolic link to ${target}, which does not exist (is its volume mounted?)`;
      }
      if (!st.isDirectory()) return `${p} is ${st.isFile() ? 'a file' : 'something'} where a folder is needed`;
    }
    if (dirname(p) === p) return null;
  }
}

/**
 * Creates the home 0700, and makes an existing one 0700: mkdir's mode applies only to what it
 * creates, so a home made by hand (or by an older version) with 0755 let every local user read
 * the store. Returns the mode it replaced, for the log, or null when nothing changed. A shared
 * folder (sticky, like /tmp) or one owned by someone else is refused rather than changed.
 */
export async function ensurePrivateHome(home: string): Promise<number | null> {
  await makeFolder(home, 'home', SETTINGS.home);
  const st = await stat(home);
  if (!st.isDirectory())
    throw new Error(
      `The home ${home} is not a folder. Give ${settingLabel(SETTINGS.home)} a folder for ob-proxy's files.`,
    );
  const mode = st.mode & 0o7777;
  if ((mode & 0o077) === 0) return null;
  if ((mode & 0o1000) !== 0) {
    throw new Error(
      `The home ${home} is a shared folder (mode ${octal(mode)}, sticky, like /tmp). Give ${settingLabel(SETTINGS.home)} a folder of ob-proxy's own, e.g. ~/.ob-proxy.`,
    );
  }
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new Error(
      `The home ${home} (mode ${octal(mode)}) is owned by uid ${st.uid}, not by this user (${uid}), and others can read it. Use a folder of your own, or have its owner run chmod 700 ${home}.`,
    );
  }
  await chmod(home, 0o700);
  return mode;
}

export function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;
}
