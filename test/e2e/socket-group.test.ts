/**
 * `serve --socket-group G` (docs/contract.md §5): the management socket is mode 0660, group G,
 * and a user in G who is not the daemon's user can run the CLI over it; a user outside G cannot.
 * Needs root, to make a group and to run the CLI as another user; skipped otherwise, with the
 * reason printed.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chmod, chown, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, eventually, startServe, tmpHome } from '../helpers/processes.js';

const NOBODY = 65534;

/** Whether user nobody can run the built CLI: a checkout in a private folder (mode 0700) cannot be. */
function nobodyCanRun(): boolean {
  try {
    execFileSync(NODE, [BIN, '--version'], { uid: NOBODY, gid: NOBODY, cwd: '/', stdio: 'ignore', timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

const isRoot = process.getuid?.() === 0;
const root = isRoot && nobodyCanRun();
if (!isRoot)
  console.log(
    'socket-group: not running as root, so no group can be made and no other user can try the socket; skipped',
  );
else if (!root)
  console.log(
    `socket-group: user nobody cannot run ${BIN} (a folder on its path is private), so no other user can try the socket; skipped`,
  );
const group = `obt${randomBytes(3).toString('hex')}`;
let gid = -1;

beforeAll(() => {
  if (!root) return;
  execFileSync('groupadd', [group]);
  gid = Number(execFileSync('getent', ['group', group], { encoding: 'utf8' }).split(':')[2]);
});
afterAll(() => {
  if (root) execFileSync('groupdel', [group]);
});

/** `ob-proxy <args>` as user nobody with the given primary group. */
function runAs(groupId: number, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      NODE,
      [BIN, ...args],
      {
        uid: NOBODY,
        gid: groupId,
        cwd: '/',
        env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', HOME: '/nonexistent' },
        // As runCli: a loaded machine can take seconds to start Node; a kill at the bound shows
        // in stderr below rather than as an empty result.
        timeout: 20_000,
      },
      (err, stdout, stderr) => {
        const e = err as (Error & { code?: number | string; signal?: string | null }) | null;
        const code = e === null ? 0 : typeof e.code === 'number' ? e.code : null;
        // A process that did not exit by itself says why, so a failure is not an empty object.
        const why = e !== null && code === null ? `[${String(e.code ?? e.signal)}] ${e.message}` : '';
        resolve({ code, stdout, stderr: stderr + why });
      },
    );
  });
}

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      NODE,
      [BIN, ...args],
      { env: { ...process.env, NO_COLOR: '1' }, timeout: 10_000 },
      (err, _stdout, stderr) => {
        const e = err as (Error & { code?: number | string }) | null;
        resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : null, stderr });
      },
    );
  });
}

describe.skipIf(!root)('serve --socket-group', () => {
  let serve: ServeProcess | undefined;
  afterAll(async () => {
    await serve?.stop();
  });

  it('gives the socket mode 0660 and the group: a member who is another user is an operator, others are not', async () => {
    const home = await tmpHome();
    // A folder the group may enter, as /run/ob-proxy would be (the home stays 0700).
    const runDir = join(home, 'run');
    await mkdir(runDir);
    await chown(runDir, 0, gid);
    await chmod(runDir, 0o750);
    const socket = join(runDir, 'ob.sock');
    serve = await startServe(home, ['--socket', socket, '--socket-group', group]);
    // Only so that the other user can walk to the socket's folder; the daemon made its home 0700.
    await chmod(home, 0o711);
    const st = await stat(socket);
    expect({ mode: (st.mode & 0o777).toString(8), gid: st.gid }).toEqual({ mode: '660', gid });
    expect(serve.logs().filter((l) => l.level === 40 || l.level === 'warn')).toEqual([]);

    const member = await runAs(gid, ['instances', 'list', '--socket', socket, '--json']);
    expect(member).toEqual({ code: 0, stdout: '[]\n', stderr: '' });
    const outsider = await runAs(NOBODY, ['instances', 'list', '--socket', socket, '--json']);
    expect(outsider.code).toBe(3);
    expect(outsider.stdout).toBe('');
  });

  it("warns when the socket's folder keeps the group out (the default socket in the 0700 home)", async () => {
    const s = await startServe(await tmpHome(), ['--socket-group', String(gid)]);
    try {
      const warning = await eventually(
        () =>
          s.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith("--socket-group: the socket's folder")),
        'the warning',
      );
      expect(warning.msg).toMatch(/mode 0700.*cannot reach the socket.*--socket \/run\/ob-proxy\/ob-proxy\.sock/);
      expect(((await stat(join(s.home, 'ob-proxy.sock'))).mode & 0o777).toString(8)).toBe('660');
    } finally {
      await s.stop();
    }
  });
});

describe('serve --socket-group with a group that does not exist', () => {
  it('is a usage error (exit 2) naming the flag, before anything is made', async () => {
    const home = await tmpHome();
    const r = await run(['serve', '--home', home, '--port', '0', '--socket-group', 'no-such-group-obt']);
    expect(r).toEqual({
      code: 2,
      stderr:
        'error: --socket-group "no-such-group-obt" is not a group on this system. Give an existing group name or a numeric gid (getent group no-such-group-obt).\n',
    });
    expect(await readdir(home)).toEqual([]);
  });
});
