/**
 * A full disk and a read-only home: each refused write is reported clearly, nothing
 * already acknowledged is lost, a revocation still takes effect at once and is written as soon
 * as the disk can take it, and everything is there after a restart.
 *
 * The disk is real where we can make one: as root with `mount`, a 1 MiB tmpfs, filled up, or
 * remounted read-only. A non-root user gets a chmod 0500 home for both (EACCES). Root without
 * mount has no way to make a write fail (the store's files are never reached through a link,
 * so the old /dev/full link at db.json.tmp is refused as such): the suite is skipped, and says so.
 */
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { type Harness, MODEL, chatBody, post, startHarness, startSim, tmpHome } from './harness.js';

interface Disk {
  kind: string;
  home: string;
  full(): Promise<void>;
  free(): Promise<void>;
  readOnly(): Promise<void>;
  writable(): Promise<void>;
  close(): Promise<void>;
}

function tryMount(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function makeDisk(): Promise<Disk | null> {
  const base = await tmpHome();
  const home = join(base, 'home');
  await mkdir(home, { mode: 0o700 });
  const filler = join(home, 'filler');
  // OBR_NO_MOUNT=1 exercises the fallback on a machine where mounting works.
  if (process.getuid?.() === 0 && process.env.OBR_NO_MOUNT !== '1' && tryMount(home)) {
    return {
      kind: 'tmpfs 1 MiB (filled; remounted read-only)',
      home,
      full: () => writeFile(filler, Buffer.alloc(2 * 1024 * 1024)).catch(() => undefined),
      free: () => rm(filler, { force: true }),
      readOnly: async () => {
        execFileSync('mount', ['-o', 'remount,ro', home]);
      },
      writable: async () => {
        execFileSync('mount', ['-o', 'remount,rw', home]);
      },
      close: async () => {
        execFileSync('umount', ['-l', home]);
      },
    };
  }
  if (process.getuid?.() === 0) return null;
  // The store's journal is an existing file: the folder's mode alone would not stop an append.
  const journal = join(home, 'db.json.journal');
  const deny = async (): Promise<void> => {
    await chmod(home, 0o500);
    await chmod(journal, 0o400).catch(() => undefined);
  };
  const allow = async (): Promise<void> => {
    await chmod(home, 0o700);
    await chmod(journal, 0o600).catch(() => undefined);
  };
  return {
    kind: 'chmod 0500 home, 0400 journal (not root)',
    home,
    full: deny,
    free: allow,
    readOnly: deny,
    writable: allow,
    close: async () => undefined,
  };
}

const made = await makeDisk();
if (made === null)
  console.log(JSON.stringify({ suite: 'store-faults', skipped: 'root without mount: no way to make a write fail' }));
const disk = made as Disk;
let sim: Simulator;
let simUrl: string;
let h: Harness;
let client: DaemonClient;

beforeAll(async () => {
  if (made === null) return;
  const s = await startSim();
  sim = s.sim;
  simUrl = s.url;
  h = await startHarness({ usageFlushMs: 3_600_000 }, { home: disk.home });
  client = new DaemonClient(h.config.socket);
});

afterAll(async () => {
  if (made === null) return;
  console.log(JSON.stringify({ suite: 'store-faults', disk: disk.kind }));
  await client.close();
  await h.stop().catch(() => undefined);
  await disk.close();
  await sim.close();
});

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await p.then(
    () => null,
    (e: unknown) => e as { code: string; message: string },
  );
  expect(err, 'the write was refused').not.toBeNull();
  return err as { code: string; message: string };
}

const kept: Record<string, string> = {};
/** Key creations the full disk still took (written into the journal's last block): acknowledged, so kept. */
const filled: string[] = [];

describe.skipIf(made === null)('a full disk', () => {
  it('refuses a key creation clearly once the journal has no room left, and changes nothing', async () => {
    await client.addInstance({ id: 'disk', model: MODEL, endpoint: simUrl });
    kept.default = (await client.ready('disk', { wait: true })).defaultKey?.secret ?? '';
    const b = await client.createKey('disk', 'b');
    kept.b = b.secret;
    kept.bId = b.id;
    await disk.full();
    // A commit is a small append: the journal's last block (4 KiB) may still take a few.
    let err: { code: string; message: string } | null = null;
    let before = await client.listKeys();
    for (let i = 0; i < 64 && err === null; i++) {
      before = await client.listKeys();
      err = await client.createKey('disk', `fill${i}`).then(
        () => {
          filled.push(`fill${i}`);
          return null;
        },
        (e: unknown) => e as { code: string; message: string },
      );
    }
    expect(filled.length, 'commits taken by a full disk').toBeLessThan(16);
    expect(err, 'the write was refused').not.toBeNull();
    if (err === null) return;
    expect(err.code).toBe('store_write_failed');
    expect(err.message).toMatch(
      /could not be written \((ENOSPC|EROFS|EACCES)\); nothing was changed\. Check free disk space and that the home folder is writable\./,
    );
    expect(await client.listKeys()).toEqual(before);
  });

  it("a revocation still takes effect at once, is recorded in the journal's reserved space, and reaches db.json once there is room", async () => {
    await disk.full();
    const err = await refusal(client.revokeKey(kept.bId as string));
    expect(err.code).toBe('store_write_failed');
    expect(err.message).toMatch(
      /^Revoked in the running daemon and recorded in the revocation journal, so it holds after a restart; but the store could not be written .* The rest of the change is retried with the next write; free disk space or fix permissions\.$/,
    );
    expect((await post(h.baseUrl, kept.b as string, chatBody('x'))).status).toBe(401);
    expect((await post(h.baseUrl, kept.default as string, chatBody('x'))).status).toBe(200);
    await disk.free();
    const c = await client.createKey('disk', 'c');
    kept.c = c.secret;
  });
});

describe.skipIf(made === null)('a read-only home', () => {
  it('refuses writes clearly, keeps serving, and writes again once writable', async () => {
    await disk.readOnly();
    const err = await refusal(client.createKey('disk', 'ro'));
    expect(err.code).toBe('store_write_failed');
    expect(err.message).toMatch(/could not be written \((EROFS|EACCES|ENOSPC)\)/);
    const stopErr = await refusal(client.move('disk', 'stop'));
    expect(stopErr.message).toMatch(/^Revoked in the running daemon/);
    // Revoked in memory at once: the stop holds for the data plane before it is on disk.
    expect((await post(h.baseUrl, kept.default as string, chatBody('x'))).status).toBe(401);
    await disk.writable();
    await client.addInstance({ id: 'after', model: MODEL, endpoint: simUrl });
  });

  it('after a restart: every acknowledged change and every revocation is there', async () => {
    await h.stop();
    await client.close();
    h = await startHarness({}, { home: disk.home });
    client = new DaemonClient(h.config.socket);
    const keys = await client.listKeys();
    expect(keys.map((k) => [k.name, k.status]).sort()).toEqual(
      [['b', 'revoked'], ['c', 'revoked'], ['default', 'revoked'], ...filled.map((n) => [n, 'revoked'])].sort(),
    );
    expect((await client.getInstance('disk')).state).toBe('stopped');
    expect((await client.getInstance('after')).state).toBe('pending');
    for (const s of [kept.default, kept.b, kept.c])
      expect((await post(h.baseUrl, s as string, chatBody('x'))).status).toBe(401);
  });
});
