/**
 * The journal of commits can write into zeros it wrote ahead (FileStoreOptions.commitReserve:
 * an append then changes no file metadata and its sync needs no commit of the file system's
 * journal), and a stop writes its two journals at once. What must still hold: entries read back after a crash, without a notice
 * for the zeros; a file put in the journal's place while running (same inode, another size)
 * refused; a commit whose revocation record failed taken back, so "nothing was changed" stays true.
 */
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { COMMIT_RESERVE, CommitJournal } from '../../src/store/commit-journal.js';
import { frame, readJournal } from '../../src/store/commit-journal-scan.js';
import { FileStore } from '../../src/store/file-store.js';

const MODELS = ['gemma4:26b'];
const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };
const home = (): Promise<string> => mkdtemp(join(tmpdir(), 'objr-'));

async function open(path: string, commitReserve = COMMIT_RESERVE) {
  const notices: string[] = [];
  const store = new FileStore(path, { onNotice: (m) => notices.push(m), commitReserve });
  const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
  return { store, lc, notices };
}

describe('the journal of commits, written into zeros written ahead', () => {
  it('entries overwrite the zeros in place; the file keeps its size; a reopen reads them with no notice', async () => {
    const path = join(await home(), 'j');
    const j = await CommitJournal.open(path, 0, 4096);
    const lines = [1, 2, 3, 4].map((n) => frame({ n, m: [{ op: 'deleteInstance', id: `i${n}` }] }));
    await j.append(lines[0]!);
    // The first append grew the file; the zeros are written after it, in the background.
    await j.idle();
    const size = (await stat(path)).size;
    expect(size).toBe(lines[0]!.length + 4096);
    for (const l of lines.slice(1)) await j.append(l);
    await j.idle();
    expect((await stat(path)).size).toBe(size);
    const bytes = await readFile(path);
    const end = lines.reduce((s, l) => s + l.length, 0);
    expect(bytes.subarray(0, end)).toEqual(Buffer.concat(lines));
    expect(bytes.subarray(end).every((b) => b === 0)).toBe(true);
    expect(await readJournal(path)).toEqual({
      entries: [1, 2, 3, 4].map((n) => ({ n, m: [{ op: 'deleteInstance', id: `i${n}` }] })),
      end,
      torn: 0,
    });
  });

  it('tops the zeros up once less than half is left, and an entry longer than them grows the file', async () => {
    const path = join(await home(), 'j');
    const j = await CommitJournal.open(path, 0, 1024);
    const big = frame({ n: 1, m: [{ op: 'deleteInstance', id: 'x'.repeat(3000) }] });
    await j.append(big);
    await j.idle();
    expect((await stat(path)).size).toBe(big.length + 1024);
    const small = frame({ n: 2, m: [{ op: 'deleteInstance', id: 'y'.repeat(600) }] });
    await j.append(small);
    await j.idle();
    // 1024 - 630 bytes left, under half: topped up to a whole reserve past the entry.
    expect((await stat(path)).size).toBe(big.length + small.length + 1024);
    expect((await readJournal(path))?.entries.map((e) => e.n)).toEqual([1, 2]);
  });

  it('a daemon killed between commits leaves entries and zeros: replayed, no "cut off" notice', async () => {
    const dir = await home();
    const path = join(dir, 'db.json');
    const { lc } = await open(path);
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
    const key = await (await lc.ready('gpu-1')).defaultKey;
    await (lc as unknown as { deps: { store: FileStore } }).deps.store.commit([]);
    // kill -9: no close, no fold. The journal holds zeros past its entries.
    const raw = await readFile(`${path}.journal`);
    expect(raw.at(-1)).toBe(0);
    const again = await open(path);
    expect(again.notices).toEqual([]);
    expect(again.lc.registry.keys.get(key!.id)).toMatchObject({ status: 'active' });
    await again.store.close();
  });

  it('a torn last entry is overwritten with zeros at the next start, not left before the next entry', async () => {
    const dir = await home();
    const path = join(dir, 'db.json');
    const first = await open(path);
    await first.lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
    // The store's own crash, mid-write of entry 2: its first bytes landed in the zeros.
    const journal = `${path}.journal`;
    await rename(journal, `${journal}.keep`);
    await first.store.close();
    await rename(`${journal}.keep`, journal);
    const torn = frame({ n: 2, m: [{ op: 'deleteInstance', id: 'gpu-1' }] });
    // The zeros ahead are written in the background, and may not be there yet on a busy machine:
    // room for the torn write either way (zeros after zeros are the same tail).
    const bytes = Buffer.concat([await readFile(journal), Buffer.alloc(torn.length)]);
    const end = (await readJournal(journal))!.end;
    torn.copy(bytes, end, 0, torn.length - 5);
    await writeFile(journal, bytes);
    const second = await open(path);
    expect(second.notices).toEqual([
      expect.stringMatching(
        new RegExp(
          `ended in a write a crash or a full disk cut off \\(${torn.length - 5} bytes, never acknowledged\\); dropped\\.`,
        ),
      ),
    ]);
    expect(second.lc.registry.instances.get('gpu-1')).toMatchObject({ state: 'pending' });
    await second.lc.addInstance({ id: 'gpu-2', model: 'gemma4:26b' });
    await second.store.close();
    const third = await open(path);
    expect([...third.lc.registry.instances.keys()].sort()).toEqual(['gpu-1', 'gpu-2']);
    expect(third.notices).toEqual([]);
    await third.store.close();
  });

  it.each([0, COMMIT_RESERVE])(
    'a copy put over the journal while the daemon runs (same file, other size) fails the commit (zeros ahead: %i)',
    async (reserve) => {
      const dir = await home();
      const path = join(dir, 'db.json');
      const { lc, store } = await open(path, reserve);
      await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
      await copyFile(`${path}.journal`, join(dir, 'older'));
      await lc.addInstance({ id: 'gpu-2', model: 'gemma4:26b' });
      // Copied over in place: the inode stays; the zeros ahead make its size no proof by itself.
      await writeFile(
        join(dir, 'older'),
        Buffer.concat([await readFile(join(dir, 'older')), Buffer.alloc(3 * COMMIT_RESERVE)]),
      );
      await copyFile(join(dir, 'older'), `${path}.journal`);
      await expect(lc.addInstance({ id: 'gpu-3', model: 'gemma4:26b' })).rejects.toThrow(
        /could not be written \(EJOURNALREPLACED\); nothing was changed/,
      );
      await store.close().catch(() => {});
    },
  );

  it.each([0, COMMIT_RESERVE])(
    'a stop whose revocation record fails is not committed either: the refusal says so and a restart agrees (zeros ahead: %i)',
    async (reserve) => {
      const dir = await home();
      const path = join(dir, 'db.json');
      const { lc, store } = await open(path, reserve);
      await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
      const key = await (await lc.ready('gpu-1')).defaultKey;
      const before = (await readJournal(`${path}.journal`))!;
      // A folder where the revocation journal was: it cannot take the record; the journal of commits can.
      await rename(`${path}.revocations`, join(dir, 'saved.revocations'));
      await mkdir(`${path}.revocations`);
      await expect(lc.halt('gpu-1', 'stop')).rejects.toThrow(
        /^Revoked in the running daemon, but the store could not be written/,
      );
      expect(store.isRevocationDurable(key!.id)).toBe(false);
      // The entry the commit wrote was taken back: the journal reads as before, zeros where it went.
      expect(await readJournal(`${path}.journal`)).toEqual({ ...before, torn: 0 });
      await rm(`${path}.revocations`, { recursive: true });
      await rename(join(dir, 'saved.revocations'), `${path}.revocations`);
      // The next write carries the stop (the lifecycle retries what was not written).
      await lc.addInstance({ id: 'gpu-2', model: 'gemma4:26b' });
      expect(store.isRevocationDurable(key!.id)).toBe(true);
      await lc.close();
      const again = await open(path, reserve);
      expect(again.lc.registry.keys.get(key!.id)).toMatchObject({
        status: 'revoked',
        revokeReason: 'instance_stopped',
      });
      expect(again.lc.registry.instances.get('gpu-1')).toMatchObject({ state: 'stopped' });
      await again.store.close();
    },
  );
});
