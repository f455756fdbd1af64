/* global console, Buffer */
/**
 * `node bench/native-counters.mjs [--dir CHECKOUT] [--body stream|plain] [--requests 10000]
 * [--warmup 3000] [--concurrency 32] [--strace] [--env K=V] [--node-flags "..."] [--label NAME]`:
 * what the daemon does natively per request, counted over a fixed window of requests rather than
 * timed, so two builds can be compared on a shared machine. The daemon (CHECKOUT's dist/, default
 * this one) runs natively with `--max-semi-space-size=4 --trace-gc-nvp` and bench/native/malloc-count.so
 * preloaded (build it with bench/native/build.sh); the upstream and the client are the same as
 * bench/callgrind.mjs's. After the warm-up it reads, before and after the window: the malloc
 * counters (calls and bytes by size class), V8's collections from the nvp lines (scavenges, full
 * collections, allocated and promoted bytes), /proc's minor and major faults, utime+stime of each
 * thread (grouped by thread name: the main thread apart from V8's and libuv's helpers) and RSS.
 * `--strace` attaches `strace -c -f` to the daemon for the window only (its CPU figures are then
 * strace's, not the program's; use the syscall counts alone from such a run).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { drive, startDaemon, wait } from './native-harness.mjs';
import { bodies } from './scenarios.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const { values: a } = parseArgs({
  options: {
    dir: { type: 'string' },
    body: { type: 'string' },
    requests: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    strace: { type: 'boolean' },
    env: { type: 'string', multiple: true },
    'node-flags': { type: 'string' },
    label: { type: 'string' },
  },
});
const dir = resolve(a.dir ?? ROOT);
const kind = a.body ?? 'stream';
const n = Number(a.requests ?? 10000);
const warm = Number(a.warmup ?? 3000);
const conc = Number(a.concurrency ?? 32);
const body = Buffer.from(bodies()[kind]);
const extraEnv = Object.fromEntries(
  (a.env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const nodeFlags = (a['node-flags'] ?? '--max-semi-space-size=4').split(' ').filter(Boolean);
const label = a.label ?? `${dir === ROOT ? 'this' : dir.split('/').pop()}-${kind}`;
const PRELOAD = join(ROOT, 'bench/native/malloc-count.so');
if (!existsSync(PRELOAD)) throw new Error(`${PRELOAD} missing: run bash bench/native/build.sh`);

const TICK = 100; // clock ticks per second (CLK_TCK on Linux)

function procStat(path) {
  const s = readFileSync(path, 'utf8');
  const comm = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  // Fields after the name, from 3 (state): minflt 10, majflt 12, utime 14, stime 15.
  return {
    comm,
    minflt: Number(f[7]),
    majflt: Number(f[9]),
    utime: Number(f[11]),
    stime: Number(f[12]),
    cpu: Number(f[11]) + Number(f[12]),
  };
}

function snapshot(pid, mallocFile, gcLines) {
  const self = procStat(`/proc/${pid}/stat`);
  const threads = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = procStat(`/proc/${pid}/task/${t}/stat`);
      const name = Number(t) === pid ? 'main' : st.comm.replace(/\d+$/, '#');
      threads[name] = (threads[name] ?? 0) + st.cpu;
      if (name === 'main') threads['main:sys'] = st.stime;
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  const malloc = Object.fromEntries(
    readFileSync(mallocFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' '))
      .map(([k, v]) => [k, Number(v)]),
  );
  return { ...self, threads, rssKiB: kb('VmRSS'), hwmKiB: kb('VmHWM'), malloc, gcLines: gcLines.length };
}

function gcWindow(lines) {
  const out = { scavenges: 0, full: 0, other: 0, allocated: 0, promoted: 0, survived: 0, pauseMs: 0, kinds: {} };
  for (const l of lines) {
    const f = Object.fromEntries(
      l
        .split(/\s+/)
        .filter((x) => x.includes('='))
        .map((x) => x.split('=')),
    );
    if (f.gc === undefined) continue;
    out.kinds[f.gc] = (out.kinds[f.gc] ?? 0) + 1;
    if (f.gc === 's') out.scavenges++;
    else if (f.gc === 'ms' || f.gc === 'mc') out.full++;
    else out.other++;
    out.allocated += Number(f.allocated ?? 0);
    out.promoted += Number(f.promoted ?? 0);
    out.survived += Number(f.new_space_survived ?? 0);
    out.pauseMs += Number(f.pause ?? 0);
  }
  return out;
}

// The counters' file lives outside the daemon's home, which is removed when it stops.
const scratch = mkdtempSync(join(tmpdir(), 'obnc-count-'));
const mallocFile = join(scratch, 'malloc-count');
const gcLines = [];
let partial = '';
const daemon = await startDaemon(dir, {
  nodeArgs: [...nodeFlags, '--trace-gc-nvp'],
  env: { LD_PRELOAD: PRELOAD, MALLOC_COUNT_FILE: mallocFile, ...extraEnv },
  onStdout: (s) => {
    const parts = (partial + s).split('\n');
    partial = parts.pop();
    for (const l of parts) if (l.includes('gc=')) gcLines.push(l);
  },
});
const proc = daemon.proc;
try {
  const { url, secret } = daemon;
  await drive(url, secret, body, kind, warm, conc);
  // The counter file is rewritten every 100 ms and nvp lines come through a pipe: let both settle.
  await wait(400);
  const before = snapshot(proc.pid, mallocFile, gcLines);
  let strace = null;
  let straceOut = '';
  if (a.strace) {
    strace = spawn('strace', ['-c', '-f', '-p', String(proc.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
    strace.stderr.setEncoding('utf8').on('data', (s) => {
      straceOut += s;
    });
    await wait(1000);
  }
  const t0 = Date.now();
  await drive(url, secret, body, kind, n, conc);
  const wallMs = Date.now() - t0;
  if (strace !== null) {
    strace.kill('SIGINT');
    await new Promise((r) => strace.once('exit', r));
  }
  await wait(400);
  const after = snapshot(proc.pid, mallocFile, gcLines);
  const gc = gcWindow(gcLines.slice(before.gcLines, after.gcLines));
  const per = (x) => Math.round((x / n) * 10) / 10;
  const m = (k) => per(after.malloc[k] - before.malloc[k]);
  const threads = {};
  for (const [k, v] of Object.entries(after.threads)) threads[k] = per(((v - (before.threads[k] ?? 0)) * 1e6) / TICK);
  const report = {
    label,
    dir,
    kind,
    requests: n,
    warmup: warm,
    concurrency: conc,
    env: extraEnv,
    nodeFlags,
    wallMs,
    cpuUsPerRequest: per(((after.cpu - before.cpu) * 1e6) / TICK),
    cpuUsByThread: threads,
    sysUsPerRequest: per(((after.stime - before.stime) * 1e6) / TICK),
    loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    minfltPerRequest: per(after.minflt - before.minflt),
    majflt: after.majflt - before.majflt,
    mallocsPerRequest: m('allocs'),
    mallocBytesPerRequest: m('alloc_bytes'),
    freesPerRequest: m('frees'),
    reallocsPerRequest: m('reallocs'),
    byClass: {
      le64: [m('le64'), m('bytes_le64')],
      le512: [m('le512'), m('bytes_le512')],
      le4k: [m('le4k'), m('bytes_le4k')],
      le64k: [m('le64k'), m('bytes_le64k')],
      gt64k: [m('gt64k'), m('bytes_gt64k')],
    },
    gc: {
      scavenges: gc.scavenges,
      full: gc.full,
      other: gc.other,
      kinds: gc.kinds,
      allocatedPerRequest: per(gc.allocated),
      promotedPerRequest: per(gc.promoted),
      survivedPerScavenge: gc.scavenges === 0 ? 0 : Math.round(gc.survived / gc.scavenges),
      pauseMs: Math.round(gc.pauseMs),
    },
    rssKiB: [before.rssKiB, after.rssKiB],
    hwmKiB: after.hwmKiB,
    arena: [before.malloc.arena, after.malloc.arena],
    arenaInUse: [before.malloc.in_use, after.malloc.in_use],
    mmapped: after.malloc.mmapped,
  };
  if (strace !== null) {
    report.syscallsPerRequest = {};
    for (const l of straceOut.split('\n')) {
      const f = l.trim().split(/\s+/);
      // % time, seconds, usecs/call, calls, [errors], syscall
      if (f.length >= 5 && /^\d+$/.test(f[3]) && /^[a-z_0-9]+$/.test(f[f.length - 1]) && f[f.length - 1] !== 'total')
        report.syscallsPerRequest[f[f.length - 1]] = Math.round((Number(f[3]) / n) * 1000) / 1000;
    }
  }
  console.log(JSON.stringify(report));
} finally {
  await daemon.stop();
  rmSync(scratch, { recursive: true, force: true });
}
