/**
 * Regression (the lowdb store): a fold renames the live journal of commits to
 * a segment and creates a new, empty journal. When that file could not be created (no inode
 * left: `df -i` full, a quota, too many open files) the fold was logged as failed, but the store
 * kept appending to the old journal's path, now gone: every later commit failed with ENOENT
 * ("could not be written (ENOENT); nothing was changed"), and went on failing once the disk had
 * room again, until a restart. Now the segment is renamed back to the live journal: commits go
 * on, the fold is tried again later and finishes once there is room, and nothing is lost.
 *
 * The disk is real: a tmpfs with few inodes, filled (root with `mount`; skipped otherwise).
 */
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../../src/domain/api-key.js';
import { LifecycleService } from '../../../src/services/lifecycle.js';
import { FileStore } from '../../../src/store/file-store.js';
import { eventually } from '../../helpers/processes.js';

const mountPoint = join(tmpdir(), `obr-inodes-${process.pid}`);
let mounted = false;
afterAll(() => {
  if (mounted) execFileSync('umount', ['-l', mountPoint], { stdio: 'ignore' });
});

function mountFewInodes(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,nr_inodes=64,mode=0700', 'tmpfs', mountPoint], {
      stdio: 'ignore',
    });
    return true;
  } catch {
    return false;
  }
}

const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };

it('commits go on when a fold cannot create the new journal, and the fold finishes once there is room', async (t) => {
  await mkdir(mountPoint, { recursive: true });
  mounted = mountFewInodes();
  if (!mounted) t.skip('needs root and mount for a tmpfs with few inodes');
  const path = join(mountPoint, 'db.json');
  const notices: string[] = [];
  // A fold every 2,000 bytes: one every few key creations.
  const store = new FileStore(path, { foldBytes: 2000, onNotice: (m) => notices.push(m) });
  const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: ['gemma4:26b'] });
  await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
  await (
    await lc.ready('gpu-1')
  ).defaultKey;

  // Every inode taken: a file can still grow, but no new one can be made.
  const fillers: string[] = [];
  for (;;) {
    const f = join(mountPoint, `filler${fillers.length}`);
    const err = await writeFile(f, '').then(
      () => null,
      (e: NodeJS.ErrnoException) => e.code,
    );
    if (err !== null) {
      expect(err).toBe('ENOSPC');
      break;
    }
    fillers.push(f);
  }
  const outcome = async (name: string): Promise<string> =>
    lc.createKey('gpu-1', name).then(
      () => 'created',
      (e: Error) => e.message,
    );
  const full: string[] = [];
  for (let i = 0; i < 10; i++) full.push(await outcome(`full${i}`));
  expect(full).toEqual(Array(10).fill('created'));
  expect(notices.some((n) => n.startsWith(`Could not fold the store journal into ${path} (ENOSPC`))).toBe(true);

  for (const f of fillers) await rm(f);
  const after: string[] = [];
  for (let i = 0; i < 10; i++) after.push(await outcome(`after${i}`));
  expect(after).toEqual(Array(10).fill('created'));
  // The fold tried again and finished: db.json holds what was committed on the full disk.
  await eventually(
    async () =>
      (await readFile(path, 'utf8')).includes('"full9"') &&
      (await readdir(mountPoint)).every((f) => !/\.journal\.\d+$/.test(f)),
    'a fold into db.json',
  );

  await store.close();
  const reopened = new FileStore(path);
  const data = await reopened.load();
  await reopened.close();
  expect(data.keys.map((k) => `${k.name}:${k.status}`).sort()).toEqual(
    [
      'default:active',
      ...Array.from({ length: 10 }, (_, i) => `full${i}:active`),
      ...Array.from({ length: 10 }, (_, i) => `after${i}:active`),
    ].sort(),
  );
});
