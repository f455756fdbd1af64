/**
 * Regression: `ob-proxy serve --home` naming a file (a slip for the store's path), or a folder on
 * a volume that is not mounted (a symbolic link to nowhere), stopped with Node's own errno line:
 * "EEXIST: file already exists, mkdir '/srv/ob'", or "ENOENT: no such file or directory" about a
 * path `ls` shows. The same for --store and --socket. Now the refusal says what is in the way and
 * which setting to change, exit 1, and nothing is created.
 */
import { readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { runCli, tmpHome } from '../../helpers/processes.js';

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
