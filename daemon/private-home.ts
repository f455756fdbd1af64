import { chmod, mkdir, stat } from 'node:fs/promises';
import { SETTINGS, settingLabel } from '../src/config.js';

/**
 * Creates the home 0700, and makes an existing one 0700: mkdir's mode applies only to what it
 * creates, so a home made by hand (or by an older version) with 0755 let every local user read
 * the store. Returns the mode it replaced, for the log, or null when nothing changed. A shared
 * folder (sticky, like /tmp) or one owned by someone else is refused rather than changed.
 */
export async function ensurePrivateHome(home: string): Promise<number | null> {
  await mkdir(home, { recursive: true, mode: 0o700 });
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
