/* global process, setTimeout, console */
/**
 * What the PostgreSQL store costs beside lowdb, counted rather than timed:
 * one lowdb daemon and one on a PostgreSQL server of this script's own (from npm, in a temp folder,
 * pg_stat_statements loaded, fsync as the server's default), both from the same dist/, measured in
 * turn over the same windows: per request (plain and streaming, 64 connections) and per second
 * of idle. For each window: the daemon's CPU (utime+stime, and stime alone), the PostgreSQL server's
 * CPU (postmaster and every backend and helper process, /proc), statements run (pg_stat_statements),
 * sessions opened (pg_stat_database), WAL records and bytes (pg_stat_wal) and syncs (pg_stat_io), V8's allocated
 * bytes and collections (--trace-gc-nvp, summed over the collections in the window: an idle window
 * without one shows none), native
 * mallocs (bench/native/malloc-count.so; build it first) and involuntary context switches.
 * Results: one JSON line per window on stderr, all of them in --json (bench/results/pg-cost.json).
 *
 * Usage: npx node bench/pg-cost.mjs [--reps 2] [--requests 10000] [--duration 4] [--idle 20] [--dir checkout]
 *        [--limits] [--json FILE]
 * `--dir`: the built checkout whose dist/ is measured (default this one). `--limits`: the bench key
 * with rpm, tpm and concurrency far above the load, so that the cluster limit exchange runs.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startPgServer } from '../test/helpers/pg-server.mjs';
import { childPids, cpuSeconds } from './procstat.mjs';
import { SCENARIOS, bodies } from './scenarios.mjs';
import { startObProxy, startUpstream } from './targets.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const { values: a } = parseArgs({
  options: {
    reps: { type: 'string' },
    duration: { type: 'string' },
    requests: { type: 'string' },
    idle: { type: 'string' },
    dir: { type: 'string' },
    json: { type: 'string' },
    limits: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (a.help === true) {
  console.log(
    'node bench/pg-cost.mjs [--reps 2] [--requests 10000] [--duration 4] [--idle 20] [--dir CHECKOUT] [--limits] [--json FILE]\n' +
      "What the PostgreSQL store costs beside lowdb, counted per request and per idle second on a server of the script's own.\n" +
      'Needs initdb on the PATH and bench/native/malloc-count.so (bash bench/native/build.sh).',
  );
  process.exit(0);
}
const reps = Number(a.reps ?? 2);
const durationMs = Number(a.duration ?? 4) * 1000;
const minRequests = Number(a.requests ?? 10_000);
const idleMs = Number(a.idle ?? 20) * 1000;
const bin = join(resolve(a.dir ?? ROOT), 'dist/bin/ob-proxy.js');
const MALLOC = join(ROOT, 'bench/native/malloc-count.so');
if (!existsSync(MALLOC)) throw new Error('build bench/native/malloc-count.so first (bash bench/native/build.sh)');
const log = (s) => process.stderr.write(`${s}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- a PostgreSQL server of our own, from npm (test/helpers/pg-server.mjs) -------------------
// fsync on: the server's default, what a deployment pays (the helper turns it off for tests).
const server = await startPgServer({
  settings: ['fsync=on', 'shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'],
});
const postmaster = server.postmasterPid();
const serverUrl = server.url;
const pgPort = server.port;
const admin = new pg.Client({ connectionString: serverUrl });
await admin.connect();
await admin.query('CREATE DATABASE bench');
const dbUrl = `postgres://postgres@127.0.0.1:${pgPort}/bench`;
const stats = new pg.Client({ connectionString: dbUrl });
await stats.connect();
await stats.query('CREATE EXTENSION pg_stat_statements');
const TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100;
/**
 * The server's CPU seconds so far: the postmaster's own, its live children's, and (cutime,
 * cstime) those of children that have ended: a backend whose connection closed takes its CPU
 * time with it from a sum over live processes.
 */
function serverCpu() {
  const f = readFileSync(`/proc/${postmaster}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(x[13]) + Number(x[14])) / TICKS + cpuSeconds([postmaster, ...childPids(postmaster)]);
}

/** Statements run in the bench database, by text (this script's own left out). */
async function pgCounts() {
  const { rows } = await stats.query(
    `SELECT query, calls::bigint AS calls FROM pg_stat_statements
      WHERE query NOT LIKE '%pg_stat%' AND dbid = (SELECT oid FROM pg_database WHERE datname = 'bench')`,
  );
  // Sessions started (pool connections opened): PostgreSQL forks a backend for each.
  const {
    rows: [d],
  } = await stats.query("SELECT sessions::bigint AS s FROM pg_stat_database WHERE datname = 'bench'");
  // The server's WAL (the whole server: this script's is the only database in use). PostgreSQL 18
  // counts WAL syncs in pg_stat_io.
  const {
    rows: [w],
  } = await stats.query(
    `SELECT wal_records::bigint AS r, wal_bytes::bigint AS b,
            (SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal')::bigint AS s FROM pg_stat_wal`,
  );
  return {
    byQuery: new Map(rows.map((r) => [r.query, Number(r.calls)])),
    sessions: Number(d.s),
    wal: { records: Number(w.r), bytes: Number(w.b), syncs: Number(w.s) },
  };
}

// --- the daemons ---------------------------------------------------------------------------
const tmp = mkdtempSync(join(tmpdir(), 'obpgcost-files-'));
const files = {};
for (const [k, v] of Object.entries(bodies({ heldChunks: 4 }))) {
  files[k] = join(tmp, `${k}.json`);
  writeFileSync(files[k], v);
}

const upstream = await startUpstream();
function launcher(name) {
  const gc = join(tmp, `${name}.gc`);
  const mc = join(tmp, `${name}.malloc`);
  return {
    gc,
    mc,
    launcher: ['sh', '-c', `exec env LD_PRELOAD=${MALLOC} MALLOC_COUNT_FILE=${mc} "$@" >${gc}`, 'sh'],
  };
}
const nodeArgs = ['--max-semi-space-size=4', '--trace-gc-nvp'];
const lowOut = launcher('lowdb');
const pgOut = launcher('pg');
// --limits: the bench key with limits far above the load, so the cluster limit exchange runs.
const limits = a.limits === true;
const targets = [
  {
    ...lowOut,
    t: await startObProxy(upstream.url, { name: 'lowdb', bin, nodeArgs, limits, launcher: lowOut.launcher }),
  },
  {
    ...pgOut,
    t: await startObProxy(upstream.url, { name: 'pg', bin, nodeArgs, limits, launcher: pgOut.launcher, store: dbUrl }),
  },
];

/** Bytes V8 allocated, summed over every collection so far (each line's allocated=), and the pauses. */
function gcAllocated(file) {
  let bytes = 0;
  let gcs = 0;
  let markSweeps = 0;
  let pauseMs = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /allocated=(\d+)/.exec(line);
    if (m === null) continue;
    bytes += Number(m[1]);
    gcs++;
    if (/ gc=(ms|mc) /.test(line)) markSweeps++;
    pauseMs += Number(/pause=([\d.]+)/.exec(line)?.[1] ?? 0);
  }
  return { bytes, gcs, markSweeps, pauseMs };
}
/** User and system CPU seconds apart, and involuntary context switches (the other processes' share of the cores). */
function cpuParts(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    user: Number(x[11]) / TICKS,
    sys: Number(x[12]) / TICKS,
    nvcsw: Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(st)?.[1] ?? 0),
  };
}
function mallocs(file) {
  const o = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [k, v] = line.split(' ');
    if (k) o[k] = Number(v);
  }
  return o.mallocs ?? o.allocs ?? 0;
}

async function snapshot(x) {
  // The counter file is rewritten every 100 ms: wait for the state of this instant to be in it.
  await sleep(250);
  const c = await pgCounts();
  return {
    daemonCpu: cpuSeconds(x.t.pids()),
    ...cpuParts(x.t.pids()[0]),
    pgCpu: serverCpu(),
    ...gcAllocated(x.gc),
    mallocs: mallocs(x.mc),
    statements: [...c.byQuery.values()].reduce((s, n) => s + n, 0),
    byQuery: c.byQuery,
    sessions: c.sessions,
    wal: c.wal,
  };
}

function diff(b, e, per) {
  const q = [];
  for (const [k, n] of e.byQuery) {
    const d = n - (b.byQuery.get(k) ?? 0);
    if (d > 0) q.push([d, k.replace(/\s+/g, ' ').slice(0, 90)]);
  }
  q.sort((x, y) => y[0] - x[0]);
  return {
    per,
    daemonCpuUs: ((e.daemonCpu - b.daemonCpu) * 1e6) / per,
    pgCpuUs: ((e.pgCpu - b.pgCpu) * 1e6) / per,
    allocatedBytes: (e.bytes - b.bytes) / per,
    daemonSysUs: ((e.sys - b.sys) * 1e6) / per,
    nvcsw: (e.nvcsw - b.nvcsw) / per,
    gcs: e.gcs - b.gcs,
    markSweeps: e.markSweeps - b.markSweeps,
    gcPauseUs: ((e.pauseMs - b.pauseMs) * 1000) / per,
    mallocs: (e.mallocs - b.mallocs) / per,
    statements: (e.statements - b.statements) / per,
    sessions: e.sessions - b.sessions,
    walRecords: (e.wal.records - b.wal.records) / per,
    walBytes: (e.wal.bytes - b.wal.bytes) / per,
    walSyncs: (e.wal.syncs - b.wal.syncs) / per,
    queries: q.slice(0, 8),
  };
}

function loadgen(x, sc, ms) {
  const o = {
    url: x.t.url,
    path: '/v1/chat/completions',
    headers: x.t.headers,
    bodyFile: files[sc.body],
    concurrency: sc.connections,
    durationMs: ms,
    warmupMs: 0,
    expectChunks: sc.expectChunks,
  };
  return new Promise((done, fail) =>
    execFile(
      process.execPath,
      [join(ROOT, 'bench/loadgen.mjs'), JSON.stringify(o)],
      { timeout: 120_000 },
      (err, out) => (err ? fail(err) : done(JSON.parse(out))),
    ),
  );
}

const results = [];
const scs = SCENARIOS.filter((s) => ['plain-c64', 'stream-c64'].includes(s.id));
log(`load average at start ${loadavg().join(' ')}`);
try {
  // Warm-up: JIT, pools, sockets.
  for (const x of targets) for (const sc of scs) await loadgen(x, sc, 1500);
  for (let rep = 0; rep < reps; rep++) {
    for (const sc of scs) {
      for (let j = 0; j < targets.length; j++) {
        const x = targets[(j + rep) % targets.length];
        const b = await snapshot(x);
        // Rounds of the load until the window holds at least --requests.
        let requests = 0;
        let errors = 0;
        let ms = 0;
        while (requests < minRequests) {
          const r = await loadgen(x, sc, durationMs);
          requests += r.requests;
          errors += r.errors + r.non200 + (r.badStreams ?? 0);
          ms += durationMs;
        }
        const e = await snapshot(x);
        const d = {
          target: x.t.name,
          scenario: sc.id,
          rep,
          requests,
          rps: (requests * 1000) / ms,
          errors,
          ...diff(b, e, requests),
        };
        results.push(d);
        log(JSON.stringify(d));
      }
    }
    // Idle: nothing sent, per second.
    for (let j = 0; j < targets.length; j++) {
      const x = targets[(j + rep) % targets.length];
      const b = await snapshot(x);
      await sleep(idleMs);
      const e = await snapshot(x);
      const d = { target: x.t.name, scenario: 'idle', rep, ...diff(b, e, (idleMs + 250) / 1000) };
      results.push(d);
      log(JSON.stringify(d));
    }
  }
} finally {
  log(`load average at end ${loadavg().join(' ')}`);
  for (const x of targets) await x.t.stop();
  await upstream.stop();
  await stats.end();
  await admin.end();
  await server.destroy();
  rmSync(tmp, { recursive: true, force: true });
}
const out = a.json ?? join(ROOT, 'bench/results/pg-cost.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
console.log(out);
