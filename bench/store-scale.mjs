/* global process, performance */
/**
 * `npm run bench -- --only store-10k`: how long a key creation and an instance stop
 * take through a real daemon's management socket, on a lowdb store of 10,000 keys and 100,000
 * audit events, against the same on an empty store, in one run. Each round adds an instance, makes
 * it ready, creates 10 keys (not timed), then times one key creation and the stop that revokes its
 * 12 keys. Also timed: the daemon's start (load, replay, the first fold) on each store. 600 rounds
 * (about 9 MB of journal) take the large store's journal past its fold size at least once.
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { bigStoreData } from './big-store.mjs';
import { OB_BIN, startServe } from './serve.mjs';

const ROOT = resolve(import.meta.dirname, '..');

function pct(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b);
  return { n: s.length, p50: pct(s, 50), p99: pct(s, 99), max: s[s.length - 1] ?? null };
}

async function measureStore(label, data, { rounds, nodeArgs, log, dir, build = { name: 'this', bin: OB_BIN } }) {
  const { DaemonClient } = await import(join(ROOT, 'dist/cli/daemon-client.js'));
  const home = mkdtempSync(join(dir, 'obstore-'));
  if (data !== null) writeFileSync(join(home, 'db.json'), JSON.stringify(data));
  const dbBytes = data === null ? 0 : statSync(join(home, 'db.json')).size;
  const t0 = performance.now();
  const serve = await startServe({
    home,
    bin: build.bin,
    nodeArgs,
    args: ['--log-level', 'warn'],
    logs: 'ignore',
    timeoutMs: 60_000,
  });
  const client = new DaemonClient(join(home, 'ob-proxy.sock'));
  try {
    const startMs = performance.now() - t0;
    const create = [];
    const stop = [];
    const control = [];
    // A fold replaces db.json: counted by its inode, to show the timed operations ran across folds.
    let ino = statSync(join(home, 'db.json')).ino;
    let folds = 0;
    for (let r = 0; r < rounds; r++) {
      const now = statSync(join(home, 'db.json')).ino;
      if (now !== ino) folds++;
      ino = now;
      const id = `m-${r}`;
      await client.addInstance({ id, model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
      // No model server behind it: the probe of its endpoint is skipped.
      await client.ready(id, { wait: true, probe: false });
      for (let k = 0; k < 10; k++) await client.createKey(id, `k${k}`);
      // The control: a read through the same socket, no store work. Its tail is the machine's.
      let t = performance.now();
      await client.status();
      control.push(performance.now() - t);
      t = performance.now();
      await client.createKey(id, 'timed');
      create.push(performance.now() - t);
      t = performance.now();
      await client.move(id, 'stop');
      stop.push(performance.now() - t);
    }
    const journalBytes = statSync(join(home, 'db.json.journal')).size;
    const result = {
      build: build.name,
      load: loadavg()[0],
      store: label,
      dir,
      dbBytesAtStart: dbBytes,
      startMs,
      create: summary(create),
      stop: summary(stop),
      control: summary(control),
      journalBytes,
      rounds,
      folds,
    };
    log(
      `${build.name}: store ${label} in ${dir} (load ${result.load.toFixed(1)}): start ${startMs.toFixed(0)} ms, ${folds} fold(s) during the rounds; key creation p50 ${result.create.p50.toFixed(2)} p99 ${result.create.p99.toFixed(2)} max ${result.create.max.toFixed(2)} ms; stop (12 keys) p50 ${result.stop.p50.toFixed(2)} p99 ${result.stop.p99.toFixed(2)} max ${result.stop.max.toFixed(2)} ms; status (control) p99 ${result.control.p99.toFixed(2)} max ${result.control.max.toFixed(2)} ms`,
    );
    return result;
  } finally {
    await client.close?.();
    await serve.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * Both stores, interleaved by repetition so the machine's drift hits them alike; on the disk
 * (the temp folder) and, when there is one, on a tmpfs (/dev/shm), where a sync costs nothing:
 * the daemon's own work, apart from the disk's.
 *
 * OB_STORE_BENCH_BASE=[name=]<another build's dist/bin/ob-proxy.js>[,…] runs those builds too,
 * interleaved with this one run by run (a before/after in one run, under the same load);
 * OB_STORE_BENCH_DIRS=<dir>[,<dir>] replaces the folders.
 */
export async function runStoreBench({ rounds = 600, reps = 2, nodeArgs = [], log }) {
  const big = bigStoreData({ instances: 100, keys: 10_000, events: 100_000 });
  const dirs = process.env.OB_STORE_BENCH_DIRS?.split(',') ?? [
    tmpdir(),
    ...(existsSync('/dev/shm') ? ['/dev/shm'] : []),
  ];
  const builds = [
    ...(process.env.OB_STORE_BENCH_BASE?.split(',') ?? []).map((b) => {
      const [name, bin] = b.includes('=') ? b.split('=') : ['base', b];
      return { name, bin: resolve(bin) };
    }),
    { name: 'this', bin: OB_BIN },
  ];
  const runs = [];
  for (let rep = 0; rep < reps; rep++) {
    for (const dir of dirs) {
      for (const [label, data] of [
        ['empty', null],
        ['10k keys, 100k events', big],
      ]) {
        // The order of the builds alternates between repetitions: neither always runs first.
        for (const build of rep % 2 === 0 ? builds : [...builds].reverse())
          runs.push(await measureStore(label, data, { rounds, nodeArgs, log, dir, build }));
      }
    }
  }
  return { started: new Date().toISOString(), rounds, reps, runs };
}

export function renderStoreBench(doc) {
  const f = (v) => (v == null ? '—' : v.toFixed(2));
  return [
    '| build | load | store | folder | db.json at start | daemon start ms | folds during the run | key creation p50 / p99 / max ms | stop (12 keys revoked) p50 / p99 / max ms | control: `status`, no write, p50 / p99 / max ms |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...doc.runs.map(
      (r) =>
        `| ${r.build} | ${r.load.toFixed(1)} | ${r.store} | ${r.dir} | ${(r.dbBytesAtStart / 1e6).toFixed(1)} MB | ${r.startMs.toFixed(0)} | ${r.folds} | ${f(r.create.p50)} / ${f(r.create.p99)} / ${f(r.create.max)} | ${f(r.stop.p50)} / ${f(r.stop.p99)} / ${f(r.stop.max)} | ${f(r.control.p50)} / ${f(r.control.p99)} / ${f(r.control.max)} |`,
    ),
    '',
  ].join('\n');
}
