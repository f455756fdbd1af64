/**
 * The revocation journal (src/store/revocation-journal.ts): what it writes, what it reads back
 * after a crash, a power loss, a hand edit or a restore, and that its reserve takes a record on
 * a full disk. Plus the store around it: a revocation the journal holds is durable even when
 * db.json cannot be written, and close() says so.
 */
import { mkdir, mkdtemp, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { UnwrittenAtShutdownError } from '../../src/services/unwritten.js';
import { FileStore } from '../../src/store/file-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { type JournalRecord, RevocationJournal } from '../../src/store/revocation-journal.js';
import { mountTmpfs, unmount } from '../helpers/store-home.js';

const dir = (): Promise<string> => mkdtemp(join(tmpdir(), 'obj-'));

function record(n: number, extra: Partial<JournalRecord> = {}): JournalRecord {
  return {
    keyId: `key${String(n).padStart(9, '0')}`,
    keyHash: n.toString(16).padStart(64, '0'),
    instance: 'gpu-1',
    deployment: 'd-1',
    reason: 'manual',
    at: '2026-11-23T12:00:00.000Z',
    ...extra,
  };
}

describe('revocation journal', () => {
  it('appends JSON lines, synced, and reads them back; space is reserved ahead as zeros', async () => {
    const path = join(await dir(), 'db.json.revocations');
    const j = await RevocationJournal.open(path, { reserve: 4096 });
    expect((await stat(path)).size).toBe(4096);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    await j.append([record(1), record(2)]);
    await j.append([record(2), record(3)]);
    expect((await stat(path)).size).toBe(4096);
    const text = (await readFile(path, 'utf8')).replace(/\0+$/, '');
    expect(
      text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => (JSON.parse(l) as JournalRecord).keyId),
    ).toEqual(['key000000001', 'key000000002', 'key000000003']);
    const again = await RevocationJournal.open(path, { reserve: 4096 });
    expect(again.records()).toEqual([record(1), record(2), record(3)]);
    expect(again.hasHash(record(3).keyHash)).toBe(true);
  });

  it('grows the file past the reserve and tops the reserve up again', async () => {
    const path = join(await dir(), 'j');
    const j = await RevocationJournal.open(path, { reserve: 1024 });
    await j.append(Array.from({ length: 20 }, (_, i) => record(i)));
    const size = (await stat(path)).size;
    expect(size).toBeGreaterThan(20 * 150);
    expect((await RevocationJournal.open(path, { reserve: 1024 })).records()).toHaveLength(20);
  });

  it('skips a last record cut off by a power loss, and the next record starts on its own line', async () => {
    const path = join(await dir(), 'j');
    const j = await RevocationJournal.open(path, { reserve: 4096 });
    await j.append([record(1)]);
    const bytes = await readFile(path);
    const end = bytes.indexOf(0);
    bytes.write('{"keyId":"key00000', end);
    await writeFile(path, bytes);
    const reopened = await RevocationJournal.open(path, { reserve: 4096 });
    expect(reopened.records()).toEqual([record(1)]);
    expect(reopened.notices.join('\n')).toMatch(/line 2 was cut off/);
    await reopened.append([record(2)]);
    expect((await RevocationJournal.open(path, { reserve: 4096 })).records()).toEqual([record(1), record(2)]);
  });

  it('skips a record with pages a power loss never wrote (zeros inside the line)', async () => {
    const path = join(await dir(), 'j');
    const line = (r: JournalRecord): string => `${JSON.stringify(r)}\n`;
    const torn = line(record(2)).replace(/"instance":"gpu-1"/, (m) => '\0'.repeat(m.length));
    await writeFile(path, line(record(1)) + torn + line(record(3)));
    const j = await RevocationJournal.open(path);
    expect(j.records().map((r) => r.keyId)).toEqual(['key000000001', 'key000000003']);
  });

  it('refuses a whole record beside zero bytes, which no power loss leaves, and leaves the file as it was', async () => {
    const path = join(await dir(), 'j');
    const content = `${JSON.stringify(record(1))}\n${'\0'.repeat(300)}${JSON.stringify(record(2))}\n`;
    await writeFile(path, content);
    await expect(RevocationJournal.open(path)).rejects.toThrow(
      `The revocation journal ${path} line 2 holds a whole revocation record beside zero bytes, which no power loss leaves. It was left untouched: delete the zero bytes of that line (keep the record: it is a revocation), or restore the journal from a backup, and start again.`,
    );
    expect(await readFile(path, 'utf8')).toBe(content);
  });

  it('refuses a line edited by hand, naming it, and leaves the file as it was', async () => {
    const path = join(await dir(), 'j');
    const content = `${JSON.stringify(record(1))}\n{"keyId":"x","reason":"because"}\n${JSON.stringify(record(3))}\n`;
    await writeFile(path, content);
    await expect(RevocationJournal.open(path)).rejects.toThrow(
      /line 2 is not a revocation record \(no "keyHash"\)\. It was left untouched: fix or delete that line by hand/,
    );
    expect(await readFile(path, 'utf8')).toBe(content);
  });

  it('refuses a symbolic link instead of following it', async () => {
    const d = await dir();
    await writeFile(join(d, 'elsewhere'), '');
    await symlink(join(d, 'elsewhere'), join(d, 'j'));
    await expect(RevocationJournal.open(join(d, 'j'))).rejects.toThrow(
      /is a symbolic link; ob-proxy does not follow links/,
    );
    expect(await readFile(join(d, 'elsewhere'), 'utf8')).toBe('');
  });

  it('writes again what the file lost when an older copy is put in its place while running', async () => {
    const path = join(await dir(), 'j');
    const j = await RevocationJournal.open(path, { reserve: 4096 });
    await j.append([record(1)]);
    const older = await readFile(path);
    await j.append([record(2)]);
    await rm(path);
    await writeFile(path, older);
    await j.append([record(3)]);
    expect((await RevocationJournal.open(path)).records().map((r) => r.keyId)).toEqual([
      'key000000001',
      'key000000002',
      'key000000003',
    ]);
  });

  const mountPoint = join(tmpdir(), `obj-full-${process.pid}`);
  let mounted = false;
  afterAll(() => {
    if (mounted) unmount(mountPoint);
  });
  it('records a revocation on a full disk, in the space reserved ahead (tmpfs)', async (t) => {
    await mkdir(mountPoint, { recursive: true });
    mounted = process.getuid?.() === 0 && mountTmpfs(mountPoint, '256k');
    if (!mounted) t.skip();
    const path = join(mountPoint, 'j');
    const j = await RevocationJournal.open(path, { reserve: 16 * 1024 });
    await writeFile(join(mountPoint, 'filler'), Buffer.alloc(1024 * 1024)).catch(() => undefined);
    await expect(writeFile(join(mountPoint, 'more'), 'x'.repeat(8192))).rejects.toMatchObject({ code: 'ENOSPC' });
    await j.append(Array.from({ length: 10 }, (_, i) => record(i)));
    expect((await RevocationJournal.open(path, { reserve: 16 * 1024 })).records()).toHaveLength(10);
  });
});

describe('the store and lifecycle around the journal', () => {
  const MODELS = ['gemma4:26b'];
  const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };

  async function readyLifecycle(store: FileStore | MemoryStore): Promise<{ lc: LifecycleService; keyId: string }> {
    const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' });
    const key = await (await lc.ready('gpu-1')).defaultKey;
    return { lc, keyId: key!.id };
  }

  it('a revocation the journal holds is durable although db.json could not be written; close() names it as kept', async () => {
    const d = await dir();
    const store = new FileStore(join(d, 'db.json'));
    const { lc, keyId } = await readyLifecycle(store);
    // A folder where the store's journal was: every commit fails, the revocation journal does not.
    await rename(join(d, 'db.json.journal'), join(d, 'saved.journal'));
    await mkdir(join(d, 'db.json.journal'));
    await expect(lc.halt('gpu-1', 'stop')).rejects.toThrow(
      /^Revoked in the running daemon and recorded in the revocation journal, so it holds after a restart/,
    );
    expect(store.isRevocationDurable(keyId)).toBe(true);
    const err = await lc.close().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UnwrittenAtShutdownError);
    expect((err as UnwrittenAtShutdownError).unwritten).toMatchObject({
      revocations: [{ keyId, instance: 'gpu-1', reason: 'instance_stopped', journaled: true }],
      instances: [{ id: 'gpu-1', state: 'stopped' }],
    });
    expect((err as Error).message).toContain(
      `Revocations in the revocation journal, applied again at the next start: ${keyId} (instance gpu-1, instance_stopped).`,
    );
    expect((err as Error).message).toContain('gpu-1 → stopped (ob-proxy instances stop gpu-1)');
    await store.close();
    await rm(join(d, 'db.json.journal'), { recursive: true });
    await rename(join(d, 'saved.journal'), join(d, 'db.json.journal'));
    const reopened = await LifecycleService.open({
      store: new FileStore(join(d, 'db.json')),
      clock,
      secrets: cryptoSecretSource,
      models: MODELS,
    });
    expect(reopened.registry.keys.get(keyId)).toMatchObject({ status: 'revoked', revokeReason: 'instance_stopped' });
  });

  it('close() says which revocations are recorded nowhere when no journal could take them', async () => {
    const store = new MemoryStore();
    const { lc, keyId } = await readyLifecycle(store);
    store.failWrites = true;
    await expect(lc.revokeKey(keyId)).rejects.toThrow(
      /^Revoked in the running daemon, but the store could not be written/,
    );
    await expect(lc.close()).rejects.toThrow(
      new RegExp(
        `Revocations NOT recorded anywhere, so these keys are active again after a restart: ${keyId} \\(instance gpu-1, manual\\)`,
      ),
    );
  });

  it('close() is quiet when everything was written', async () => {
    const { lc } = await readyLifecycle(new MemoryStore());
    await expect(lc.close()).resolves.toBeUndefined();
  });
});
