import { execFile } from 'node:child_process';
import { chmod, chown, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { obError } from '../src/errors.js';

const GROUP_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}\$?$/;

function getent(name: string): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('getent', ['group', name], { timeout: 5_000 }, (err, stdout) => resolve(err === null ? stdout : null));
  });
}

/**
 * `--socket-group G`: a group name (through NSS with getent, so LDAP groups count) or a numeric
 * gid. Node has no getgrnam; getent is in every glibc and musl system.
 */
export async function resolveGroup(group: string): Promise<number> {
  if (/^\d+$/.test(group)) return Number(group);
  const unknown = obError('invalid_argument', {
    param: 'socket-group',
    message: `--socket-group "${group}" is not a group on this system. Give an existing group name or a numeric gid (getent group ${GROUP_NAME.test(group) ? group : 'NAME'}).`,
  });
  if (!GROUP_NAME.test(group)) throw unknown;
  const line = await getent(group);
  const gid = line === null ? NaN : Number(line.split(':')[2]);
  if (!Number.isSafeInteger(gid)) throw unknown;
  return gid;
}

/**
 * Opens the management socket to a group: mode 0660, group `gid`. Whoever is in the group is an
 * operator. Returns a warning when the socket's folder does not let the group reach it (the home
 * is 0700): the socket then needs --socket in a folder the group may enter.
 */
export async function shareSocket(path: string, gid: number): Promise<string | null> {
  await chown(path, -1, gid).catch((err: unknown) => {
    throw new Error(
      `Cannot give the socket ${path} to group ${gid} for --socket-group (${(err as NodeJS.ErrnoException).code ?? 'error'}): the daemon's user must be root or a member of that group.`,
      { cause: err },
    );
  });
  await chmod(path, 0o660);
  const dir = dirname(path);
  const st = await stat(dir);
  const reachable = (st.mode & 0o001) !== 0 || (st.gid === gid && (st.mode & 0o010) !== 0);
  return reachable
    ? null
    : `--socket-group: the socket's folder ${dir} does not let group ${gid} in (mode 0${(st.mode & 0o777).toString(8)}, group ${st.gid}), so its members cannot reach the socket. Put the socket in a folder of that group, e.g. --socket /run/ob-proxy/ob-proxy.sock with /run/ob-proxy mode 0750, group ${gid}.`;
}
