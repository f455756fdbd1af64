/**
 * Regression (adversarial review, the lowdb store): with db.json deleted or lost after a crash,
 * `serve` started anyway with an empty store: every instance and key gone (each client answered
 * 401), and the journal of commits, which held the changes since the last fold, was renamed aside
 * as `*.unused-<time>` as if an older backup had been restored. Now a journal that continues a
 * db.json (its first entry is not entry 1) with no db.json refuses the start, naming the files
 * and what to do; nothing is changed, and once db.json is restored the journal is replayed over it.
 */
import { copyFile, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { cliJson, runCli, startServe, tmpHome } from '../helpers/processes.js';
import { MODEL } from '../helpers/store-home.js';

it('a missing db.json with a journal that continues it refuses the start; restored, nothing is lost', async () => {
  const home = await tmpHome();
  const store = join(home, 'db.json');
  let serve = await startServe(home);
  await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL], home);
  // A clean stop folds gpu-1 into db.json: the journal then continues db.json from entry 2.
  expect(await serve.stop()).toBe(0);
  serve = await startServe(home);
  await cliJson(['instances', 'add', 'gpu-2', '--model', MODEL], home);
  await serve.stop('SIGKILL');
  const journal = await readFile(`${store}.journal`);
  await copyFile(store, join(home, 'backup.json'));
  await rm(store);

  const started = await startServe(home).then(
    async (s) => {
      await s.stop();
      return null;
    },
    (err: Error) => err.message,
  );
  expect(started, 'serve started on an empty store').toEqual(
    expect.stringContaining(
      `The store ${store} is missing, but its journal ${store}.journal holds changes made after it (from entry 2). Nothing was changed. ` +
        `Restore db.json from a backup (the journal is replayed over it), or, to start an empty store, move ${store}.journal and ${store}.journal.* away (every revocation in ${store}.revocations still holds).`,
    ),
  );
  expect((await readdir(home)).filter((f) => f.includes('unused'))).toEqual([]);
  expect(await readFile(`${store}.journal`)).toEqual(journal);

  await copyFile(join(home, 'backup.json'), store);
  serve = await startServe(home);
  const list = await runCli(['instances', 'list', '--json'], { home });
  expect((JSON.parse(list.stdout) as { id: string }[]).map((i) => i.id).sort()).toEqual(['gpu-1', 'gpu-2']);
  expect(await serve.stop()).toBe(0);
});
