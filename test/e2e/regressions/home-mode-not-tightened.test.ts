/**
 * Regression (Operators' mistakes): a home that already existed with mode 0755 was
 * left so (mkdir's mode applies only to what it creates): any local user could read the store
 * and the audit trail. Now `serve` makes it 0700 at start and logs that it did.
 */
import { chmod, mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { runCli, startServe, tmpHome } from '../../helpers/processes.js';

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
