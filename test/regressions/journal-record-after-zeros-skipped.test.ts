/**
 * Regression: the revocation journal skipped any line holding zero bytes as a write a power loss
 * cut off, even when a whole revocation record followed the zeros: the daemon started and served
 * the key that record revokes. No write leaves a whole record after pages it never wrote of
 * another (appends wait for each other's sync, and a record is one line), so that line was not
 * made by a crash: the start is now refused, naming the line and what to do, with every other
 * corruption (a hand edit, binary garbage) already refused the same way.
 */
import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore } from '../../src/store/file-store.js';
import { journalRecordOf } from '../../src/store/revoked-wins.js';

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
