/**
 * Regression (Operators' mistakes): a symbolic link at db.json.tmp was followed and
 * its target overwritten with the store; a db.json that was a symbolic link was replaced by a
 * plain file on the first write, silently parting from the file it pointed to. Now the temp file
 * is opened O_CREAT|O_EXCL|O_NOFOLLOW and the store without following links: a link at either
 * path is refused with a message, and nothing outside the home is touched.
 */
import { lstat, mkdir, readFile, readlink, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { cliJson, runCli, startServe, tmpHome } from '../../helpers/processes.js';

async function victim(): Promise<string> {
  const dir = await tmpHome();
  const path = join(dir, 'victim');
  await writeFile(path, 'precious');
  return path;
}

it('a link at db.json.tmp when the daemon starts: refused, its target untouched', async () => {
  const home = await tmpHome();
  const target = await victim();
  await symlink(target, join(home, 'db.json.tmp'));
  const r = await runCli(['serve', '--port', '0'], { home });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    `${join(home, 'db.json.tmp')} exists and is a symbolic link; ob-proxy writes its temp file there and never follows or replaces such a thing.`,
  );
  expect(await readFile(target, 'utf8')).toBe('precious');
});

it('a link put at db.json.tmp while the daemon runs: the write of db.json is refused, its target untouched, nothing lost', async () => {
  const home = await tmpHome();
  const target = await victim();
  const serve = await startServe(home);
  await symlink(target, join(home, 'db.json.tmp'));
  // Commits go to the journal; db.json is written when the journal is folded, at the latest at stop.
  expect((await runCli(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b'], { home })).code).toBe(0);
  expect(await serve.stop()).toBe(0);
  expect(
    serve
      .logs()
      .some(
        (l) =>
          String(l.msg).includes('Could not fold the store journal') && String(l.msg).includes('is a symbolic link'),
      ),
  ).toBe(true);
  expect(await readFile(target, 'utf8')).toBe('precious');
  await unlink(join(home, 'db.json.tmp'));
  const again = await startServe(home);
  try {
    expect((await cliJson<{ id: string }[]>(['instances', 'list'], home)).map((i) => i.id)).toEqual(['gpu-1']);
  } finally {
    await again.stop();
  }
});

it('a stale regular db.json.tmp left by a crash is replaced, as before', async () => {
  const home = await tmpHome();
  await writeFile(join(home, 'db.json.tmp'), '{"half":');
  const serve = await startServe(home);
  try {
    expect((await runCli(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b'], { home })).code).toBe(0);
  } finally {
    await serve.stop();
  }
});

it('a db.json that is a symbolic link is refused, not silently replaced by a plain file', async () => {
  const home = await tmpHome();
  const real = join(await tmpHome(), 'real');
  await mkdir(real);
  await writeFile(join(real, 'db.json'), JSON.stringify({ version: 2, instances: [], keys: [], events: [] }));
  await symlink(join(real, 'db.json'), join(home, 'db.json'));
  const r = await runCli(['serve', '--port', '0'], { home });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`${join(home, 'db.json')} is a symbolic link (to ${join(real, 'db.json')})`);
  expect(r.stderr).toContain(`point --store (or OB_PROXY_STORE) at ${join(real, 'db.json')} itself`);
  expect((await lstat(join(home, 'db.json'))).isSymbolicLink()).toBe(true);
  expect(await readlink(join(home, 'db.json'))).toBe(join(real, 'db.json'));
});
