/**
 * Regression (Operators' mistakes): `serve --socket <home>/db.json`, or --socket
 * naming any existing file, deleted that file (taken for a stale socket) and started with an
 * empty store: every key and revocation gone. Now only what lstat says is a socket is removed;
 * anything else, and the store's own file names, are refused with a message.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { runCli, startServe, tmpHome } from '../../helpers/processes.js';

let home: string;
let store: string;
beforeAll(async () => {
  home = await tmpHome();
  const serve = await startServe(home);
  expect((await runCli(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b'], { home })).code).toBe(0);
  expect(await serve.stop()).toBe(0);
  store = await readFile(join(home, 'db.json'), 'utf8');
});

it('--socket <home>/db.json is refused and the store is untouched', async () => {
  const r = await runCli(['serve', '--port', '0', '--socket', join(home, 'db.json')], { home });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`The socket path ${join(home, 'db.json')} is one of ob-proxy's own files`);
  expect(await readFile(join(home, 'db.json'), 'utf8')).toBe(store);
});

it('--socket naming any other existing file is refused and the file kept', async () => {
  const notes = join(home, 'notes.txt');
  await writeFile(notes, 'keep me');
  const r = await runCli(['serve', '--port', '0', '--socket', notes], { home });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    `The socket path ${notes} exists and is a regular file, not a socket; ob-proxy removes only a stale socket there.`,
  );
  expect(await readFile(notes, 'utf8')).toBe('keep me');
  expect(await readFile(join(home, 'db.json'), 'utf8')).toBe(store);
});

it('a stale socket left by a crash is still replaced', async () => {
  const serve = await startServe(home);
  await serve.stop('SIGKILL');
  const again = await startServe(home);
  expect(await again.stop()).toBe(0);
});
