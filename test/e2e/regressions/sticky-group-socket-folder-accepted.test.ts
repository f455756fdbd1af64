/**
 * Regression: a socket folder writable by its group was refused, but not when it was sticky
 * (mode 1770): the daemon started, and any member of the group could put their own socket in
 * the daemon's place while it was not there (before the start, during a restart) and be
 * answered by the CLI of every operator. The sticky bit only keeps others from removing the
 * daemon's socket. docs/security.md says such a folder is refused, sticky or not: now it is.
 */
import { chmod, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { runCli, tmpHome } from '../../helpers/processes.js';

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
