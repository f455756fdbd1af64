/**
 * Regression (the lowdb store): with db.json deleted or lost after a crash,
 * `serve` started anyway with an empty store: every instance and key gone (each client answered
 * 401), and the journal of commits, which held the changes since the last fold, was renamed aside
 * as `*.unused-<time>` as if an older backup had been restored. Now a journal that continues a
 * db.json (its first entry is not entry 1) with no db.json refuses the start, naming the files
 * and what to do; nothing is changed, and once db.json is restored the journal is replayed over it.
 */
import { copyFile, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { cliJson, runCli, startServe, startSimulate, tmpHome } from '../../helpers/processes.js';
import { MODEL } from '../../helpers/store-home.js';

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

it('a db.json deleted after a clean stop, with revocations recorded, refuses the start; restored, nothing is lost', async () => {
  const home = await tmpHome();
  const store = join(home, 'db.json');
  const sim = await startSimulate([MODEL], ['--chunks', '1']);
  try {
    const serve = await startServe(home);
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
    await cliJson(['instances', 'ready', 'gpu-1'], home);
    const made = await cliJson<{ id: string }>(['keys', 'create', '--instance', 'gpu-1', '--name', 'gone'], home);
    await cliJson(['keys', 'revoke', made.id, '--yes'], home);
    // A clean stop folds everything into db.json: its commit journal is empty, nothing there to
    // tell a lost db.json from a first start, but the revocation journal is not.
    expect(await serve.stop()).toBe(0);
    await copyFile(store, join(home, 'backup.json'));
    const revocations = await readFile(`${store}.revocations`);
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
        `The store ${store} is missing, but ${store}.revocations records 1 revocation(s) of keys it held: it was deleted or lost. Nothing was changed. ` +
          `Restore db.json from a backup (the revocations are applied over it), or, to start an empty store on purpose, rename ${store}.revocations to keep it (a backup restored beside it later needs it).`,
      ),
    );
    expect(await readFile(`${store}.revocations`)).toEqual(revocations);

    await copyFile(join(home, 'backup.json'), store);
    const again = await startServe(home);
    const keys = JSON.parse((await runCli(['keys', 'list', '--json'], { home })).stdout) as {
      id: string;
      status: string;
    }[];
    expect(keys.find((k) => k.id === made.id)?.status).toBe('revoked');
    expect(keys.filter((k) => k.status === 'active')).toHaveLength(1);
    expect(await again.stop()).toBe(0);
  } finally {
    await sim.stop();
  }
});
