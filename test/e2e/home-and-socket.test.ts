/**
 * The daemon's home and socket: modes tightened, a home that is not a folder, socket paths too
 * long, socket folders writable by others. One describe per defect found, its story above it.
 */
import { chmod, mkdir, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, startServe, tmpHome } from '../helpers/processes.js';

/**
 * Regression (Operators' mistakes): a home that already existed with mode 0755 was
 * left so (mkdir's mode applies only to what it creates): any local user could read the store
 * and the audit trail. Now `serve` makes it 0700 at start and logs that it did.
 */
describe('serve makes its home 0700', () => {
  it('an existing 0755 home is made 0700, and the log says so', async () => {
    const home = join(await tmpHome(), 'home');
    await mkdir(home);
    await chmod(home, 0o755);
    const serve = await startServe(home);
    try {
      expect((await stat(home)).mode & 0o777).toBe(0o700);
      expect(serve.logs().find((l) => String(l.msg).includes('made it 0700'))).toMatchObject({
        home,
        was: '0755',
        now: '0700',
      });
    } finally {
      await serve.stop();
    }
  });

  it('a shared sticky folder (like /tmp) as home is refused, not made private', async () => {
    const home = join(await tmpHome(), 'shared');
    await mkdir(home);
    await chmod(home, 0o1777);
    const r = await runCli(['serve', '--port', '0'], { home });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is a shared folder (mode 01777, sticky, like /tmp)');
    expect((await stat(home)).mode & 0o7777).toBe(0o1777);
  });
});

/**
 * Regression: `ob-proxy serve --home` naming a file (a slip for the store's path), or a folder on
 * a volume that is not mounted (a symbolic link to nowhere), stopped with Node's own errno line:
 * "EEXIST: file already exists, mkdir '/srv/ob'", or "ENOENT: no such file or directory" about a
 * path `ls` shows. The same for --store and --socket. Now the refusal says what is in the way and
 * which setting to change, exit 1, and nothing is created.
 */
describe('a home, store or socket path in the way is refused with a sentence', () => {
  it('says which part of the path is in the way and which setting to change', async () => {
    const dir = await tmpHome();
    const file = join(dir, 'db.json');
    await writeFile(file, '{}');
    const unmounted = join(dir, 'data');
    await symlink('/nonexistent-volume/ob-proxy', unmounted);

    const cases: [string[], string][] = [
      [
        ['--home', file],
        `The home ${file} cannot be made: ${file} is a file where a folder is needed. Give --home (or OB_PROXY_HOME) a folder ob-proxy can use.`,
      ],
      [
        ['--home', join(file, 'home')],
        `The home ${join(file, 'home')} cannot be made: ${file} is a file where a folder is needed. Give --home (or OB_PROXY_HOME) a folder ob-proxy can use.`,
      ],
      [
        ['--home', unmounted],
        `The home ${unmounted} cannot be made: ${unmounted} is a symbolic link to /nonexistent-volume/ob-proxy, which does not exist (is its volume mounted?). Give --home (or OB_PROXY_HOME) a folder ob-proxy can use.`,
      ],
      [
        ['--home', join(dir, 'home'), '--store', join(file, 'db.json')],
        `The store's folder ${file} cannot be made: ${file} is a file where a folder is needed. Give --store (or OB_PROXY_STORE) a path in a folder ob-proxy can use.`,
      ],
      [
        ['--home', join(dir, 'home2'), '--socket', join(unmounted, 'ob.sock')],
        `The socket's folder ${unmounted} cannot be made: ${unmounted} is a symbolic link to /nonexistent-volume/ob-proxy, which does not exist (is its volume mounted?). Give --socket (or OB_PROXY_SOCKET) a path in a folder ob-proxy can use.`,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['serve', '--port', '0', ...args]);
      expect({ args, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
        args,
        code: 1,
        stdout: '',
        stderr: `error: ${message}\n`,
      });
    }
    // Nothing was made beside what the test made (the homes of the last two cases excepted).
    expect((await readdir(dir)).sort()).toEqual(['data', 'db.json', 'home', 'home2']);
  });
});

/**
 * Regression: a --home (or --socket) deep enough that the socket's path passed the 107 bytes a
 * Unix socket's path may have. Node cut the path short without a word and bound what was left:
 * the daemon put its management socket beside the home, in the folder above it (with the
 * default umask, outside the private home whose mode the daemon checks), then stopped on a bare
 * "ENOENT: no such file or directory, chmod '…/ob-proxy.sock'", leaving that stray socket behind;
 * the CLI said the daemon refused the connection. Now both say the path is too long, by how
 * much, and what to give instead; the daemon exits 1 and binds nothing.
 */
describe('a socket path too long is refused, saying by how much', () => {
  it('refuses a socket path longer than a Unix socket takes, and binds nothing', async () => {
    const parent = await tmpHome();
    const home = join(parent, 'h'.repeat(110));
    const socket = join(home, 'ob-proxy.sock');
    const message =
      `The socket path ${socket} is ${Buffer.byteLength(socket)} bytes long; a Unix socket's path may be at most 107. ` +
      'Give --socket (or OB_PROXY_SOCKET) a shorter path (e.g. /run/ob-proxy/ob-proxy.sock), or a shorter --home.';

    const serve = await runCli(['serve', '--port', '0'], { home });
    expect([serve.code, serve.stdout, serve.stderr]).toEqual([1, '', `error: ${message}\n`]);
    // No socket anywhere: neither in the home nor, cut short, beside it.
    expect(await readdir(parent)).toEqual(['h'.repeat(110)]);
    expect((await readdir(home)).filter((f) => f.includes('sock'))).toEqual([]);

    const cli = await runCli(['keys', 'list'], { home });
    expect([cli.code, cli.stdout, cli.stderr]).toEqual([3, '', `error: ${message}\n`]);

    // The deep home serves with a short --socket, as the refusal says.
    const short = join(await tmpHome(), 'ob.sock');
    const daemon = await startServe(home, ['--socket', short]);
    try {
      const status = await runCli(['status', '--json', '--socket', short], { home });
      expect(status.code, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ socket: short, store: join(home, 'db.json') });
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
  });
});

/**
 * Regression: a socket folder writable by its group was refused, but not when it was sticky
 * (mode 1770): the daemon started, and any member of the group could put their own socket in
 * the daemon's place while it was not there (before the start, during a restart) and be
 * answered by the CLI of every operator. The sticky bit only keeps others from removing the
 * daemon's socket. docs/security.md says such a folder is refused, sticky or not: now it is.
 */
describe('a group-writable socket folder is refused, sticky or not', () => {
  it.each([
    { mode: 0o1770, shown: '01770, sticky or not' },
    { mode: 0o1730, shown: '01730, sticky or not' },
    { mode: 0o770, shown: '0770' },
  ])('a socket folder of mode $shown is refused at start, naming why', async ({ mode, shown }) => {
    const home = await tmpHome();
    const dir = join(home, 'shared');
    await mkdir(dir);
    await chmod(dir, mode);
    const r = await runCli(['serve', '--port', '0', '--socket', join(dir, 'ob.sock')], { home });
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `error: The socket directory ${dir} is writable by other users (its group; mode ${shown}): anyone in the group could replace the socket. ` +
        `Use a private directory (chmod 700 ${dir}; 750 to let --socket-group in) or --socket elsewhere.\n`,
    });
    expect(await readdir(dir)).toEqual([]);
  });
});
