/**
 * The lowdb store's files on disk: a FIFO, a failed fold, a missing store, a symbolic link, a
 * --socket naming a store file, two daemons on one home. One describe per defect found, its
 * story above it.
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  access,
  copyFile,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { FileStore } from '../../src/store/file-store.js';
import { postChat } from '../helpers/chat.js';
import {
  BIN,
  cliJson,
  eventually,
  NODE,
  runCli,
  type ServeProcess,
  type SimProcess,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { chat, MODEL, readyInstance } from '../helpers/store-home.js';

/**
 * A store file that is a FIFO (a careless `mkfifo`, a restore gone wrong) must refuse the start
 * with a line naming it, not hang it: opening a FIFO for reading blocks until a writer comes, and
 * the blocked open holds one of libuv's four threadpool threads for good. Before, `serve` on a
 * home whose db.json, db.json.journal or db.json.revocations was a FIFO never started and never
 * said why (killed by the guard below: signal SIGKILL).
 */
describe('store files that are FIFOs', () => {
  interface Exit {
    code: number | null;
    signal: string | null;
    stderr: string;
  }

  function serve(home: string): Promise<Exit> {
    return new Promise((resolve) => {
      execFile(
        NODE,
        [BIN, 'serve', '--home', home, '--port', '0'],
        { env: { ...process.env, NO_COLOR: '1' }, timeout: 20_000, killSignal: 'SIGKILL' },
        (err, _stdout, stderr) => {
          const e = err as (NodeJS.ErrnoException & { code?: number | string; signal?: string | null }) | null;
          resolve({
            code: e === null ? 0 : typeof e.code === 'number' ? e.code : null,
            signal: e?.signal ?? null,
            stderr,
          });
        },
      );
    });
  }

  describe('a store file that is a FIFO refuses the start', () => {
    it.each(['db.json', 'db.json.journal', 'db.json.revocations'])(
      '%s',
      async (name) => {
        const home = await tmpHome();
        execFileSync('mkfifo', [join(home, name)]);
        const r = await serve(home);
        expect(r.signal).toBeNull();
        expect(r.code).toBe(1);
        expect(r.stderr).toContain(join(home, name));
        expect(r.stderr).toMatch(/^error: .*is not a regular file.*\n$/);
        expect((await readdir(home)).filter((f) => f.endsWith('.sock'))).toEqual([]);
      },
      30_000,
    );
  });
});

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
describe('commits go on after a fold whose new journal could not be made', () => {
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
});

/**
 * Regression (the lowdb store): with db.json deleted or lost after a crash,
 * `serve` started anyway with an empty store: every instance and key gone (each client answered
 * 401), and the journal of commits, which held the changes since the last fold, was renamed aside
 * as `*.unused-<time>` as if an older backup had been restored. Now a journal that continues a
 * db.json (its first entry is not entry 1) with no db.json refuses the start, naming the files
 * and what to do; nothing is changed, and once db.json is restored the journal is replayed over it.
 */
describe('a journal without its db.json refuses the start', () => {
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
});

/**
 * Regression (Operators' mistakes): a symbolic link at db.json.tmp was followed and
 * its target overwritten with the store; a db.json that was a symbolic link was replaced by a
 * plain file on the first write, silently parting from the file it pointed to. Now the temp file
 * is opened O_CREAT|O_EXCL|O_NOFOLLOW and the store without following links: a link at either
 * path is refused with a message, and nothing outside the home is touched.
 */
describe("links at the store's paths are refused, never followed", () => {
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
});

/**
 * Regression (Operators' mistakes): `serve --socket <home>/db.json`, or --socket
 * naming any existing file, deleted that file (taken for a stale socket) and started with an
 * empty store: every key and revocation gone. Now only what lstat says is a socket is removed;
 * anything else, and the store's own file names, are refused with a message.
 */
describe('--socket removes only a socket', () => {
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
});

/**
 * Regression (Two daemons on one home): a second `serve` with its own --socket
 * started on the same db.json. A key revoked through one daemon was still answered 200 by the
 * other, whose next write (its usage flush) put `active` back on disk. Now the store is locked:
 * the second daemon exits non-zero naming the first one's pid, before binding anything; and the
 * lock is the kernel's, so it is free again the moment the holder dies, even by kill -9.
 */
describe('a file store is locked to one daemon', () => {
  let sim: SimProcess;
  let home: string;
  let first: ServeProcess;
  beforeAll(async () => {
    sim = await startSimulate(['gemma4:26b']);
    home = await tmpHome();
    first = await startServe(home);
  });
  afterAll(async () => {
    await first.stop();
    await sim.stop();
  });

  it("refuses a second daemon on the same store, naming the first one's pid, and binds nothing", async () => {
    const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);
    const otherDir = await tmpHome();
    const otherSocket = join(otherDir, 'second.sock');
    const second = await runCli(['serve', '--port', '0', '--socket', otherSocket], {
      home,
      env: { OB_PROXY_USAGE_FLUSH_MS: '50', OB_PROXY_LOG_LEVEL: 'warn' },
    });
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(
      `Another ob-proxy daemon (pid ${first.proc.pid}) is already using the store ${join(home, 'db.json')}`,
    );
    expect(second.stdout).toBe('');
    await expect(access(otherSocket)).rejects.toThrow();
    // The first daemon's revocation holds, on its port and on disk.
    expect((await runCli(['keys', 'revoke', keyId], { home })).code).toBe(0);
    expect((await postChat(first.baseUrl, secret, chat())).status).toBe(401);
  });

  it('is free again right after the holder is killed with SIGKILL', async () => {
    await first.stop('SIGKILL');
    first = await startServe(home);
    expect(first.logs().some((l) => l.msg === 'ob-proxy serving')).toBe(true);
  });
});
