/* global console, setTimeout, Buffer */
/**
 * `node bench/ops-counters.mjs [--requests N] [--warmup N] [--concurrency C] [--stream] [--rounds R]
 * [--variants plain,metrics,limits,concurrency,ops] [--checkout DIR] [--strace] [--out FILE]`:
 * what metrics and per-key limits cost, in counts that do not depend on how busy the machine is.
 * Every variant runs natively, side by side, each in its own daemon; after `--warmup` requests
 * each, rounds of `--requests` go to each daemon in turn (the order turning every round), and
 * around each round are read: V8's allocated and promoted bytes and its collections by kind
 * (`--trace-gc-nvp`, the daemon's stdout), native mallocs and bytes (bench/native/malloc-count.so,
 * LD_PRELOAD), minor page faults and CPU time by thread (/proc), and with `--strace` the
 * syscalls (strace -c attached for the round; it slows the daemon, so that pass counts only
 * syscalls). Per request: divided by the round's requests. One JSON line per round and variant,
 * then per variant the sums over all rounds.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  closeSync,
  readdirSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './scenarios.mjs';
import { OB_BIN, startObProxy, startUpstream } from './targets.mjs';
import { VARIANTS, send } from './ops-variants.mjs';

const { values: a } = parseArgs({
  options: {
    requests: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    stream: { type: 'boolean' },
    variants: { type: 'string' },
    checkout: { type: 'string' },
    rounds: { type: 'string' },
    strace: { type: 'boolean' },
    keep: { type: 'boolean' },
    'node-flags': { type: 'string' },
  },
});
const N = Number(a.requests ?? 20000);
const WARM = Number(a.warmup ?? 20000);
const C = Number(a.concurrency ?? 64);
const ROUNDS = Number(a.rounds ?? 2);
const variants = (a.variants ?? 'plain,ops').split(',');
const nodeFlags = (a['node-flags'] ?? '--max-semi-space-size=4').split(' ').filter(Boolean);
const body = Buffer.from(bodies()[a.stream === true ? 'stream' : 'plain']);
const ROOT = resolve(import.meta.dirname, '..');
const MALLOC = join(ROOT, 'bench/native/malloc-count.so');
if (!existsSync(MALLOC)) throw new Error('build bench/native/malloc-count.so first: bash bench/native/build.sh');

/** A variant may name a checkout: `plain@../base` runs that checkout's daemon. */
function parseVariant(v) {
  const [kind, dir] = v.split('@');
  return {
    v,
    kind,
    bin:
      dir === undefined
        ? a.checkout === undefined
          ? OB_BIN
          : join(resolve(a.checkout), 'dist/bin/ob-proxy.js')
        : join(resolve(dir), 'dist/bin/ob-proxy.js'),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** CPU ticks by thread name, and minor/major faults, of the process (fields 10, 12, 14, 15). */
function procCounts(pid) {
  const byThread = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let s;
    try {
      s = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const name = tid === String(pid) ? 'main' : s.slice(s.indexOf('(') + 1, s.lastIndexOf(')')).trim();
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    byThread[name] = (byThread[name] ?? 0) + Number(f[11]) + Number(f[12]);
  }
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { minflt: Number(f[7]), majflt: Number(f[9]), cpu: Number(f[11]) + Number(f[12]), byThread };
}

function mallocCounts(file) {
  const out = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [k, v] = line.split(' ');
    if (k) out[k] = Number(v);
  }
  return out;
}

/** The GC lines written since byte `from` of the daemon's stdout. */
function gcSince(file, from) {
  const size = statSync(file).size;
  const fd = openSync(file, 'r');
  const buf = Buffer.alloc(size - from);
  readSync(fd, buf, 0, buf.length, from);
  closeSync(fd);
  const g = { allocated: 0, promoted: 0, scavenges: 0, markCompacts: 0, other: 0, pauseMs: 0 };
  for (const line of buf.toString('utf8').split('\n')) {
    const alloc = / allocated=(\d+)/.exec(line);
    if (alloc === null) continue;
    g.allocated += Number(alloc[1]);
    g.promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
    g.pauseMs += Number(/ pause=([\d.]+)/.exec(line)?.[1] ?? 0);
    const kind = / gc=(\w+)/.exec(line)?.[1];
    if (kind === 's') g.scavenges++;
    else if (kind === 'mc') g.markCompacts++;
    else g.other++;
  }
  return { g, size };
}

function diff(x, y) {
  const out = {};
  for (const k of Object.keys(y)) out[k] = (y[k] ?? 0) - (x[k] ?? 0);
  return out;
}

const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim() || 100);

async function straceRound(pid, url, headers) {
  const out = join(dir, `strace.${pid}.${Date.now()}`);
  const st = spawn('strace', ['-c', '-f', '-p', String(pid), '-o', out], { stdio: 'ignore' });
  await sleep(1000);
  await send(url, headers, body, N, C);
  st.kill('SIGINT');
  await new Promise((r) => st.once('exit', r));
  const calls = {};
  let total = 0;
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
    // The last line is strace's own total.
    if (m === null || m[2] === 'total') continue;
    calls[m[2]] = Number(m[1]);
    total += Number(m[1]);
  }
  rmSync(out);
  return { total, calls };
}

const dir = mkdtempSync(join(tmpdir(), 'obops-'));
const upstream = await startUpstream();
const targets = [];
try {
  for (const spec of variants.map(parseVariant)) {
    const gcFile = join(dir, `gc.${targets.length}`);
    const mFile = join(dir, `malloc.${targets.length}`);
    const launcher = [
      'sh',
      '-c',
      `exec "$@" >>${gcFile}`,
      'sh',
      'env',
      `LD_PRELOAD=${MALLOC}`,
      `MALLOC_COUNT_FILE=${mFile}`,
      'stdbuf',
      '-oL',
    ];
    const t = await startObProxy(upstream.url, {
      name: spec.v,
      bin: spec.bin,
      nodeArgs: [...nodeFlags, '--trace-gc-nvp'],
      launcher,
      ...VARIANTS[spec.kind],
    });
    targets.push({ ...spec, t, gcFile, mFile, pid: t.pids()[0], rounds: [] });
  }
  // Warmed in turns, a slice each, so that every daemon comes to its first round after the same
  // warm-up and about as long idle: none waits while all the others warm.
  const SLICES = 5;
  for (let s = 0; s < SLICES; s++)
    for (const x of targets) await send(x.t.url, x.t.headers, body, Math.ceil(WARM / SLICES), C);
  await sleep(500);
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < targets.length; i++) {
      const x = targets[(i + r) % targets.length];
      if (a.strace === true) {
        const s = await straceRound(x.pid, x.t.url, x.t.headers);
        const row = {
          variant: x.v,
          round: r,
          stream: a.stream === true,
          requests: N,
          syscallsPerRequest: +(s.total / N).toFixed(3),
        };
        for (const [k, v] of Object.entries(s.calls)
          .sort((p, q) => q[1] - p[1])
          .slice(0, 8))
          row[k] = +(v / N).toFixed(3);
        x.rounds.push({ syscalls: s.total, calls: s.calls });
        console.log(JSON.stringify(row));
        continue;
      }
      const gc0 = statSync(x.gcFile).size;
      const m0 = mallocCounts(x.mFile);
      const p0 = procCounts(x.pid);
      const t0 = Date.now();
      await send(x.t.url, x.t.headers, body, N, C);
      const ms = Date.now() - t0;
      const p1 = procCounts(x.pid);
      // The counter file is rewritten every 100 ms.
      await sleep(300);
      const m1 = mallocCounts(x.mFile);
      const { g } = gcSince(x.gcFile, gc0);
      const cpuUs = (p1.cpu - p0.cpu) * TICK_US;
      const threads = diff(p0.byThread, p1.byThread);
      const rec = { ms, cpuUs, minflt: p1.minflt - p0.minflt, threads, malloc: diff(m0, m1), g };
      x.rounds.push(rec);
      console.log(
        JSON.stringify({
          variant: x.v,
          round: r,
          stream: a.stream === true,
          requests: N,
          reqPerS: Math.round((N * 1000) / ms),
          cpuUsPerReq: +(cpuUs / N).toFixed(1),
          mainUsPerReq: +(((threads.main ?? 0) * TICK_US) / N).toFixed(1),
          otherThreadsUsPerReq: +(((p1.cpu - p0.cpu - (threads.main ?? 0)) * TICK_US) / N).toFixed(1),
          v8AllocBytesPerReq: Math.round(g.allocated / N),
          v8PromotedBytesPerReq: Math.round(g.promoted / N),
          scavenges: g.scavenges,
          markCompacts: g.markCompacts,
          otherGcs: g.other,
          gcPauseUsPerReq: +((g.pauseMs * 1000) / N).toFixed(2),
          mallocsPerReq: +(rec.malloc.allocs / N).toFixed(2),
          mallocBytesPerReq: Math.round(rec.malloc.alloc_bytes / N),
          freesPerReq: +(rec.malloc.frees / N).toFixed(2),
          minfltPerReq: +(rec.minflt / N).toFixed(3),
        }),
      );
    }
  }
  // Sums over every round of a variant.
  for (const x of targets) {
    const n = N * x.rounds.length;
    if (a.strace === true) {
      const calls = {};
      let total = 0;
      for (const r of x.rounds) {
        total += r.syscalls;
        for (const [k, v] of Object.entries(r.calls)) calls[k] = (calls[k] ?? 0) + v;
      }
      const row = { variant: x.v, summary: true, requests: n, syscallsPerRequest: +(total / n).toFixed(3) };
      for (const [k, v] of Object.entries(calls)
        .sort((p, q) => q[1] - p[1])
        .slice(0, 10))
        row[k] = +(v / n).toFixed(3);
      console.log(JSON.stringify(row));
      continue;
    }
    const sum = (f) => x.rounds.reduce((t, r) => t + f(r), 0);
    const threads = {};
    for (const r of x.rounds) for (const [k, v] of Object.entries(r.threads)) threads[k] = (threads[k] ?? 0) + v;
    console.log(
      JSON.stringify({
        variant: x.v,
        summary: true,
        stream: a.stream === true,
        requests: n,
        cpuUsPerReq: +(sum((r) => r.cpuUs) / n).toFixed(1),
        threadsUsPerReq: Object.fromEntries(
          Object.entries(threads).map(([k, v]) => [k, +((v * TICK_US) / n).toFixed(1)]),
        ),
        v8AllocBytesPerReq: Math.round(sum((r) => r.g.allocated) / n),
        v8PromotedBytesPerReq: Math.round(sum((r) => r.g.promoted) / n),
        scavenges: sum((r) => r.g.scavenges),
        markCompacts: sum((r) => r.g.markCompacts),
        otherGcs: sum((r) => r.g.other),
        gcPauseUsPerReq: +((sum((r) => r.g.pauseMs) * 1000) / n).toFixed(2),
        mallocsPerReq: +(sum((r) => r.malloc.allocs) / n).toFixed(3),
        mallocBytesPerReq: Math.round(sum((r) => r.malloc.alloc_bytes) / n),
        minfltPerReq: +(sum((r) => r.minflt) / n).toFixed(3),
      }),
    );
  }
} finally {
  for (const x of targets) await x.t.stop();
  await upstream.stop();
  if (a.keep === true) console.log(JSON.stringify({ kept: dir }));
  else rmSync(dir, { recursive: true, force: true });
}
