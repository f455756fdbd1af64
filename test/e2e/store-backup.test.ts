/**
 * `ob-proxy store backup <file>`: a consistent copy through the running daemon, or from
 * the files when none runs (db.json with the revocation journal folded in), written 0600. A
 * restore is stop, copy back, start: an older backup brings instances and keys back, never a
 * revoked key. A store written by a newer version is refused at start and left untouched.
 */
import { copyFile, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { runCli as runInProcess } from '../../cli/program.js';
import { hello, postChat } from '../helpers/chat.js';
import { freshDatabase, type TestDatabase } from '../helpers/postgres.js';
import {
  cliJson,
  runCli,
  type ServeProcess,
  type SimProcess,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { MODEL, readStore, readyInstance, type StoreFile, writeStore } from '../helpers/store-home.js';

let serve: ServeProcess | undefined;
let sim: SimProcess | undefined;
afterEach(async () => {
  await serve?.stop();
  await sim?.stop();
  serve = undefined;
  sim = undefined;
});

interface BackupReport {
  file: string;
  from: string;
  via: string;
  version: number;
  instances: number;
  keys: number;
  activeKeys: number;
  revokedKeys: number;
  events: number;
}

async function backup(home: string, file: string, extra: string[] = []): Promise<BackupReport> {
  return cliJson<BackupReport>(['store', 'backup', file, ...extra], home);
}

async function readBackup(file: string): Promise<StoreFile> {
  return JSON.parse(await readFile(file, 'utf8')) as StoreFile;
}

const statusOf = (f: StoreFile, id: string): unknown => f.keys.find((k) => k.id === id)?.status;

describe('store backup', () => {
  it('through the daemon, from the files, and a restored older backup never revives a revoked key', async () => {
    const home = await tmpHome();
    const out = await tmpHome();
    sim = await startSimulate([MODEL]);
    serve = await startServe(home);
    const k0 = await readyInstance(home, 'gpu-1', sim.url);
    const k1 = await cliJson<{ id: string; secret: string }>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'notebook'],
      home,
    );
    expect((await postChat(serve.baseUrl, k1.secret, hello(MODEL))).status).toBe(200);

    // 1. Through the running daemon: its state now, usage included (not flushed to db.json yet).
    const early = join(out, 'early.json');
    expect(await backup(home, early)).toEqual({
      file: early,
      from: join(home, 'db.json'),
      via: 'daemon',
      version: 2,
      instances: 1,
      keys: 2,
      activeKeys: 2,
      revokedKeys: 0,
      events: 4,
    });
    expect((await stat(early)).mode & 0o777).toBe(0o600);
    const b1 = await readBackup(early);
    expect(b1.version).toBe(2);
    expect(b1.instances.map((i) => [i.id, i.state])).toEqual([['gpu-1', 'ready']]);
    expect(b1.keys.map((k) => [k.id, k.status])).toEqual([
      [k0.keyId, 'active'],
      [k1.id, 'active'],
    ]);
    expect(b1.keys.find((k) => k.id === k1.id)!.usage).toMatchObject({ requests: 1 });
    expect(b1.events.map((e) => e.type)).toEqual(['instance.added', 'instance.state', 'key.created', 'key.created']);
    // Hashes, never a secret.
    expect(await readFile(early, 'utf8')).not.toContain(k1.secret);

    // An existing file is replaced only with --force.
    const again = await runCli(['store', 'backup', early], { home });
    expect([again.code, again.stdout, again.stderr]).toEqual([
      1,
      '',
      `error: ${early} already exists. Give another file, or --force to replace it.\n`,
    ]);

    expect((await runCli(['keys', 'revoke', k1.id], { home })).code).toBe(0);
    await serve.stop();
    serve = undefined;

    // 2. No daemon: from the files. A revocation only the journal holds (db.json restored or
    // edited since) is folded in.
    const store = await readStore(home);
    await writeStore(home, {
      ...store,
      keys: store.keys.map((k) => ({ ...k, status: 'active', revokedAt: null, revokeReason: null })),
      events: store.events.filter((e) => e.type !== 'key.revoked'),
    });
    const offline = join(out, 'offline.json');
    const r2 = await backup(home, offline);
    expect(r2).toMatchObject({ via: 'file', from: join(home, 'db.json'), keys: 2, activeKeys: 1, revokedKeys: 1 });
    const b2 = await readBackup(offline);
    expect(statusOf(b2, k1.id)).toBe('revoked');
    expect(b2.keys.find((k) => k.id === k1.id)).toMatchObject({ revokeReason: 'manual' });
    // Reading for a backup changed nothing on disk.
    expect((await readStore(home)).keys.every((k) => k.status === 'active')).toBe(true);

    // 3. Restore the older backup (k1 active in it): stop, copy back, start. k1 stays revoked.
    await copyFile(early, join(home, 'db.json'));
    serve = await startServe(home);
    expect((await postChat(serve.baseUrl, k1.secret, hello(MODEL))).json).toMatchObject({
      error: { code: 'revoked_api_key' },
    });
    expect((await postChat(serve.baseUrl, k0.secret, hello(MODEL))).status).toBe(200);
    const keys = await cliJson<{ id: string; status: string }[]>(['keys', 'list'], home);
    expect(keys.map((k) => [k.id, k.status])).toEqual([
      [k0.keyId, 'active'],
      [k1.id, 'revoked'],
    ]);
  });

  it('no daemon after a crash: the copy holds what only the commit journal held, and the home is left as it was', async () => {
    const home = await tmpHome();
    const out = await tmpHome();
    sim = await startSimulate([MODEL]);
    serve = await startServe(home);
    const k0 = await readyInstance(home, 'gpu-1', sim.url);
    const k1 = await cliJson<{ id: string }>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'after-the-snapshot'],
      home,
    );
    expect((await runCli(['keys', 'revoke', k0.keyId], { home })).code).toBe(0);
    // kill -9: no fold at close, so db.json is the snapshot and db.json.journal holds the rest.
    serve.proc.kill('SIGKILL');
    await serve.exited;
    serve = undefined;
    const before = await Promise.all(
      ['db.json', 'db.json.journal', 'db.json.revocations'].map((f) => readFile(join(home, f))),
    );
    expect(before[1]!.length).toBeGreaterThan(0);

    const file = join(out, 'crashed.json');
    expect(await backup(home, file)).toMatchObject({
      via: 'file',
      instances: 1,
      keys: 2,
      activeKeys: 1,
      revokedKeys: 1,
    });
    const b = await readBackup(file);
    expect(b.keys.map((k) => [k.id, k.status])).toEqual([
      [k0.keyId, 'revoked'],
      [k1.id, 'active'],
    ]);
    // Read only: nothing folded, replayed into, or appended to the home's files.
    const after = await Promise.all(
      ['db.json', 'db.json.journal', 'db.json.revocations'].map((f) => readFile(join(home, f))),
    );
    expect(after.map((x, i) => x.equals(before[i]!))).toEqual([true, true, true]);
  });

  it('a PostgreSQL store: backed up through its daemon, loaded back into a new database with store migrate', async () => {
    const dbs: TestDatabase[] = [await freshDatabase(), await freshDatabase()];
    try {
      const home = await tmpHome();
      sim = await startSimulate([MODEL]);
      serve = await startServe(home, ['--store', dbs[0]!.url]);
      const k0 = await readyInstance(home, 'gpu-1', sim.url);
      const file = join(await tmpHome(), 'pg.json');
      expect(await backup(home, file)).toMatchObject({
        via: 'daemon',
        from: dbs[0]!.url.replace(/\/$/, ''),
        version: 2,
        instances: 1,
        keys: 1,
        activeKeys: 1,
      });
      await serve.stop();
      serve = undefined;

      const migrated = await runCli(['store', 'migrate', '--from', file, '--to', dbs[1]!.url, '--json']);
      expect(migrated.code, migrated.stderr).toBe(0);
      serve = await startServe(await tmpHome(), ['--store', dbs[1]!.url]);
      expect((await postChat(serve.baseUrl, k0.secret, hello(MODEL))).status).toBe(200);
    } finally {
      await serve?.stop();
      serve = undefined;
      for (const db of dbs) await db.drop();
    }
  });

  it('refuses a PostgreSQL store with no daemon, pointing at pg_dump', async () => {
    const home = await tmpHome();
    const r = await runCli(['store', 'backup', join(home, 'b.json'), '--store', 'postgres://u@127.0.0.1:1/x'], {
      home,
    });
    expect([r.code, r.stdout]).toEqual([1, '']);
    expect(r.stderr).toMatch(
      /^error: No daemon answered on the socket, and a PostgreSQL store is backed up through a daemon .* or with pg_dump\.\n$/,
    );
  });

  it('no daemon and no store: says so, writes nothing', async () => {
    const home = await tmpHome();
    const r = await runCli(['store', 'backup', join(home, 'b.json')], { home });
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: There is no store at ${join(home, 'db.json')}: no daemon answered, and no file is there. Give --home or --store of the daemon to back up.\n`,
    });
  });
});

describe('upgrades', () => {
  it('a store written by a newer version is refused at start, and left untouched', async () => {
    const home = await tmpHome();
    const newer = JSON.stringify({ version: 3, instances: [], keys: [], events: [] });
    await writeFile(join(home, 'db.json'), newer, { mode: 0o600 });
    const r = await runCli(['serve', '--port', '0'], { home });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^error: The store .*db\.json was written by a newer ob-proxy \(version 3\)\. Upgrade ob-proxy\. It was left untouched\.\n$/,
    );
    expect(await readFile(join(home, 'db.json'), 'utf8')).toBe(newer);
  });
});

/**
 * Regression: `store backup --force` onto the daemon's own `db.json.journal` or
 * `db.json.revocations` was accepted. Every later write then failed with a misleading "check
 * free disk space" hint, and the daemon would not start again until the file was edited by hand.
 * Now every file of the store (the store itself, its journals, audit archive, temp, pid and lock
 * files, journal segments) is refused as a backup's path, through a link or a relative path too,
 * with the daemon running or not, and nothing is written.
 */
describe("store backup and the store's own files", () => {
  const ADVICE =
    'a backup written there would replace what the daemon keeps. Give a path outside them, e.g. /var/backups/ob-proxy/db-$(date +%F).json.';

  // Each phase is a test of its own, and every path is tried by the CLI in process, over the
  // daemon's real socket or with none (the refusal is the CLI's, as it writes the file); one path
  // per phase as a process, for the binary's exit code. Twenty CLI processes and two daemons one
  // after another outlasted a test's time on a loaded machine.
  async function inProcess(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const code = await runInProcess(args, {
      version: '0.0.0-test',
      io: { out: (t) => (stdout += t), err: (t) => (stderr += t), isTTY: false, env: {} },
      connect: (path) => Promise.resolve(new DaemonClient(path)),
      serve: () => Promise.reject(new Error('not run in process')),
      simulate: () => Promise.reject(new Error('not run in process')),
      demo: () => Promise.reject(new Error('not run in process')),
    });
    return { code, stdout, stderr };
  }

  describe('refuses every file of the store as a backup path, with or without a daemon, and the store goes on', () => {
    let home: string;
    let targets: [string, string][];
    let check: () => Promise<void>;

    beforeAll(async () => {
      home = await tmpHome();
      const store = join(home, 'db.json');
      const elsewhere = await tmpHome();
      await symlink(join(home, 'db.json.journal'), join(elsewhere, 'linked.json'));
      targets = [
        [store, 'the store itself'],
        ...['journal', 'revocations', 'audit', 'tmp', 'pid', 'lock', 'journal.3'].map((s): [string, string] => [
          `${store}.${s}`,
          `one of the store's own files (${store}.${s})`,
        ]),
        [join(elsewhere, 'linked.json'), `one of the store's own files (${store}.journal)`],
        [join(home, 'sub', '..', 'db.json.revocations'), `one of the store's own files (${store}.revocations)`],
      ];

      check = async (): Promise<void> => {
        const before = await Promise.all(
          ['db.json.journal', 'db.json.revocations'].map((f) => readFile(join(home, f)).catch(() => null)),
        );
        for (const [i, [file, what]] of targets.entries()) {
          const args = ['store', 'backup', file, '--force'];
          const r = i === 0 ? await runCli(args, { home }) : await inProcess([...args, '--home', home]);
          expect({ file, ...r }).toEqual({
            file,
            code: 1,
            stdout: '',
            stderr: `error: ${file} is ${what}: ${ADVICE}\n`,
          });
        }
        const after = await Promise.all(
          ['db.json.journal', 'db.json.revocations'].map((f) => readFile(join(home, f)).catch(() => null)),
        );
        expect(after).toEqual(before);
      };
    });

    it('with the daemon running', async () => {
      const serve = await startServe(home);
      try {
        await cliJson(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b'], home);
        await check();
        // The store still takes writes.
        await cliJson(['instances', 'add', 'gpu-2', '--model', 'gemma4:26b'], home);
      } finally {
        expect(await serve.stop()).toBe(0);
      }
    });

    it('with no daemon: the backup is read from the files, and the same paths are refused', async () => {
      await check();
      const again = await startServe(home);
      try {
        const list = await cliJson<{ id: string }[]>(['instances', 'list'], home);
        expect(list.map((i) => i.id)).toEqual(['gpu-1', 'gpu-2']);
      } finally {
        expect(await again.stop()).toBe(0);
      }
    });
  });
});
