/**
 * Regression: `store backup --force` onto the daemon's own `db.json.journal` or
 * `db.json.revocations` was accepted. Every later write then failed with a misleading "check
 * free disk space" hint, and the daemon would not start again until the file was edited by hand.
 * Now every file of the store (the store itself, its journals, audit archive, temp, pid and lock
 * files, journal segments) is refused as a backup's path, through a link or a relative path too,
 * with the daemon running or not, and nothing is written.
 */
import { readFile, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cliJson, runCli, startServe, tmpHome } from '../../helpers/processes.js';

const ADVICE =
  'a backup written there would replace what the daemon keeps. Give a path outside them, e.g. /var/backups/ob-proxy/db-$(date +%F).json.';

// Each phase is a test of its own: twenty CLI processes and two daemons one after another
// outlasted one test's time on a loaded machine.
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
      for (const [file, what] of targets) {
        const r = await runCli(['store', 'backup', file, '--force'], { home });
        expect({ file, ...r }).toEqual({ file, code: 1, stdout: '', stderr: `error: ${file} is ${what}: ${ADVICE}\n` });
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
