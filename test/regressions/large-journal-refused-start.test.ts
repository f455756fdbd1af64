/**
 * Regression (the lowdb store): the journal of commits was read whole at
 * start (one readFile). It grows for as long as folds fail (a home db.json cannot be written
 * into while the journal still can, usage flushed every few seconds): past 2 GiB the start was
 * refused with "cannot be read (ERR_FS_FILE_TOO_LARGE). Check the permissions of the home
 * folder", wrong advice and no way in to the acknowledged commits; below that the whole file and
 * every entry as an object were held in memory before the first was applied. A torn tail was
 * also read whole into one buffer. Now the journal is read a megabyte at a time and each entry
 * applied as it is read.
 *
 * The file is made past 2 GiB cheaply: whole entries, then a zero-filled tail (sparse), which a
 * reader must skip like the zeros a crash leaves; the path taken is that of any large journal.
 */
import { mkdtemp, readdir, rm, stat, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore } from '../../src/store/file-store.js';

const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };
let dir = '';
afterAll(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

// Reading 2.2 GiB (of zeros, mostly) takes seconds of CPU: more than the default on a busy machine.
it('a journal past 2 GiB is read and replayed; every acknowledged commit is there', { timeout: 120_000 }, async () => {
  dir = await mkdtemp(join(tmpdir(), 'obr-big-'));
  const path = join(dir, 'db.json');
  const first = new FileStore(path);
  const lc = await LifecycleService.open({ store: first, clock, secrets: cryptoSecretSource, models: ['gemma4:26b'] });
  await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
  await (
    await lc.ready('gpu-1')
  ).defaultKey;
  await first.close();
  // Reopened, and left without a close (a crash): these commits are only in the journal.
  const second = new FileStore(path);
  const lc2 = await LifecycleService.open({
    store: second,
    clock,
    secrets: cryptoSecretSource,
    models: ['gemma4:26b'],
  });
  for (let i = 0; i < 3; i++) await lc2.createKey('gpu-1', `k${i}`);
  await truncate(`${path}.journal`, 2200 * 1024 * 1024);

  const notices: string[] = [];
  const third = new FileStore(path, { onNotice: (m) => notices.push(m) });
  const loaded = await third.load().then(
    (data) => data.keys.map((k) => `${k.name}:${k.status}`).sort(),
    (err: Error) => err.message,
  );
  expect(loaded).toEqual(['default:active', 'k0:active', 'k1:active', 'k2:active']);
  expect(notices).toEqual([]);
  // Folded at load: db.json holds it all, the journal starts again empty, no segment is left.
  await third.close();
  expect((await stat(`${path}.journal`)).size).toBe(0);
  expect((await readdir(dir)).sort()).toEqual(['db.json', 'db.json.journal', 'db.json.revocations']);
  const again = new FileStore(path);
  expect((await again.load()).keys.map((k) => k.name).sort()).toEqual(['default', 'k0', 'k1', 'k2']);
  await again.close();
});
