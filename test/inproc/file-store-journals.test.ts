/**
 * The lowdb store's journals read at start: large ones in bounded memory, records after a torn
 * write kept. One describe per defect found, its story above it.
 */
import { appendFile, mkdtemp, readdir, readFile, rm, stat, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore } from '../../src/store/file-store.js';
import { journalRecordOf } from '../../src/store/revoked-wins.js';

/**
 * Regression: the revocation journal skipped any line holding zero bytes as a write a power loss
 * cut off, even when a whole revocation record followed the zeros: the daemon started and served
 * the key that record revokes. No write leaves a whole record after pages it never wrote of
 * another (appends wait for each other's sync, and a record is one line), so that line was not
 * made by a crash: the start is now refused, naming the line and what to do, with every other
 * corruption (a hand edit, binary garbage) already refused the same way.
 */
describe('a journal record after zeros refuses the start', () => {
  const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };
  const MODELS = ['gemma4:26b'];
  let dir = '';
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  it('a whole revocation record after zero bytes refuses the start instead of being skipped', async () => {
    dir = await mkdtemp(join(tmpdir(), 'obr-zeros-'));
    const path = join(dir, 'db.json');
    const store = new FileStore(path);
    const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
    await lc.ready('gpu-1');
    const { key, secret } = await lc.createKey('gpu-1', 'revoked-by-journal');
    await store.close();
    // The key is active in db.json; the journal revokes it, after zeros, on a line of its own.
    const revoked = { ...key, status: 'revoked' as const, revokedAt: new Date(clock.now()).toISOString() };
    const journal = `${path}.revocations`;
    const before = (await readFile(journal)).toString('latin1').replace(/\0+$/, '');
    const line = `${'\0'.repeat(512)}${JSON.stringify(journalRecordOf(revoked))}\n`;
    await appendFile(journal, line);

    const opened = await LifecycleService.open({
      store: new FileStore(path),
      clock,
      secrets: cryptoSecretSource,
      models: MODELS,
    }).then(
      (again) => ({ started: true, serves: again.registry.authenticate(secret, clock.now(), true).ok }),
      (err: Error) => ({ started: false, message: err.message }),
    );
    const lineNo = before.split('\n').filter((l) => l !== '').length + 1;
    expect(opened).toEqual({
      started: false,
      message: expect.stringContaining(
        `The revocation journal ${journal} line ${lineNo} holds a whole revocation record beside zero bytes, which no power loss leaves. It was left untouched: delete the zero bytes of that line (keep the record: it is a revocation), or restore the journal from a backup, and start again.`,
      ),
    });
  });
});

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
describe('a journal past 2 GiB is read a piece at a time', () => {
  const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };
  let dir = '';
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  // Reading 2.2 GiB (of zeros, mostly) takes seconds of CPU: more than the default on a busy machine.
  it(
    'a journal past 2 GiB is read and replayed; every acknowledged commit is there',
    { timeout: 120_000 },
    async () => {
      dir = await mkdtemp(join(tmpdir(), 'obr-big-'));
      const path = join(dir, 'db.json');
      const first = new FileStore(path);
      const lc = await LifecycleService.open({
        store: first,
        clock,
        secrets: cryptoSecretSource,
        models: ['gemma4:26b'],
      });
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
    },
  );
});
