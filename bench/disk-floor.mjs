/* global Buffer, process, performance */
/**
 * The disk's own floor for a durable commit (issue 12 §7): what any design that syncs before it
 * acknowledges can reach in this folder, apart from ob-proxy. Each mode does N small writes, each
 * followed by its sync, on a file in `--dir` (default: the temp folder, where store-10k runs):
 *
 * - append+fsync, append+fdatasync: the file grows with each write (the size is metadata the sync
 *   must make durable: on ext4 that is a commit of the file system's journal, shared by every
 *   process writing to it);
 * - inplace+fdatasync, inplace+fsync: the file was filled with zeros and synced first, each write
 *   overwrites them (no size change, no new block);
 * - 2 files in place, one after the other / both syncs at once: a write that needs two files.
 *
 * The control writes in place without syncing: its tail is the machine's (CPU, scheduling).
 *
 * `npx node bench/disk-floor.mjs [--dir D] [--n 500] [--bytes 600] [--reps 2]`; prints p50 / p99 / max ms.
 */
import { closeSync, fdatasyncSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: a } = parseArgs({
  options: { dir: { type: 'string' }, n: { type: 'string' }, bytes: { type: 'string' }, reps: { type: 'string' } },
});
const N = Number(a.n ?? 500);
const BYTES = Number(a.bytes ?? 600);
const home = mkdtempSync(join(a.dir ?? tmpdir(), 'diskfloor-'));
const line = Buffer.alloc(BYTES, 0x61);
line[BYTES - 1] = 0x0a;

function summary(ms) {
  const s = [...ms].sort((x, y) => x - y);
  const pct = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  return `p50 ${pct(50).toFixed(2)}  p99 ${pct(99).toFixed(2)}  max ${s[s.length - 1].toFixed(2)} ms`;
}

function prealloc(path) {
  const fd = openSync(path, 'w+');
  const zeros = Buffer.alloc(N * BYTES + 4096);
  writeSync(fd, zeros, 0, zeros.length, 0);
  fsyncSync(fd);
  return fd;
}

function syncMode(name, inPlace, sync) {
  const path = join(home, name.replace(/\W+/g, '-'));
  const fd = inPlace ? prealloc(path) : openSync(path, 'w+');
  const ms = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    writeSync(fd, line, 0, BYTES, i * BYTES);
    sync(fd);
    ms.push(performance.now() - t);
  }
  closeSync(fd);
  return ms;
}

/** Two preallocated files, each written then synced: one after the other, or both syncs at once. */
async function twoFiles(name, together) {
  const fds = [prealloc(join(home, `${name}-a`)), prealloc(join(home, `${name}-b`))];
  closeSync(fds[0]);
  closeSync(fds[1]);
  const fhs = [await open(join(home, `${name}-a`), 'r+'), await open(join(home, `${name}-b`), 'r+')];
  const ms = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    if (together) {
      await Promise.all(
        fhs.map(async (fh) => {
          await fh.write(line, 0, BYTES, i * BYTES);
          await fh.datasync();
        }),
      );
    } else {
      for (const fh of fhs) {
        await fh.write(line, 0, BYTES, i * BYTES);
        await fh.datasync();
      }
    }
    ms.push(performance.now() - t);
  }
  for (const fh of fhs) await fh.close();
  return ms;
}

const modes = [
  ['control: in place, no sync', () => syncMode('nosync', true, () => {})],
  ['append+fsync', () => syncMode('append-fsync', false, fsyncSync)],
  ['append+fdatasync', () => syncMode('append-fdatasync', false, fdatasyncSync)],
  ['inplace+fdatasync', () => syncMode('inplace-fdatasync', true, fdatasyncSync)],
  ['inplace+fsync', () => syncMode('inplace-fsync', true, fsyncSync)],
  ['2 files in place, one after the other (async)', () => twoFiles('seq', false)],
  ['2 files in place, both syncs at once (async)', () => twoFiles('par', true)],
];
try {
  process.stdout.write(`${home}: ${N} writes of ${BYTES} B each, each synced\n`);
  // Interleaved (--reps, default 2), so the machine's drift hits every mode alike.
  for (let rep = 0; rep < Number(a.reps ?? 2); rep++) {
    for (const [name, run] of modes) process.stdout.write(`${name.padEnd(48)} ${summary(await run())}\n`);
  }
} finally {
  rmSync(home, { recursive: true, force: true });
}
