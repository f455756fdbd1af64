/* global process, setTimeout */
/**
 * `npm run bench`: one run, on the machine it runs on, of every scenario against every target (the
 * upstream directly, ob-proxy, the reference proxy, nginx when installed), repeated and reduced
 * to medians, written as Markdown to bench/RESULTS.md and as JSON to bench/results/latest.json.
 *
 * Flags: --reps N (5) --duration S (2) --warmup S (per scenario and process: 4, or 1 with
 *        --same-process) --preroll S (2: the same load on the same target right before each
 *        measured run) --streams N (2000) --out FILE
 *        --json FILE --no-wrk --no-nginx --no-build --log-level L (warn) --smoke (seconds)
 *        --only id,id (scenarios; for profiling work: written to bench/results/partial.md) --no-held
 *        --node-flags=… (V8 flags for both Node proxies; default the production advice of
 *        docs/performance.md, --max-semi-space-size=8; "" for Node's defaults)
 *        --baseline DIR (another checkout, built: measured as the extra target "baseline", in the
 *        same interleaved repetitions, so a change is judged against its parent in one run)
 *        --cli-runs N (40; the CLI start-up scenario, bench/cli.mjs) --no-cli
 *        --only store-10k (the lowdb store at 10,000 keys and 100,000 events: bench/store-scale.mjs)
 *        --postgres URL (a PostgreSQL server: ob-proxy on the PostgreSQL store, in a database of its
 *        own made and dropped here, measured as the extra target "ob-proxy-pg" beside the lowdb one)
 *        --ops (the extra target "ob-proxy-ops": metrics on and the bench key with generous
 *        --rpm/--tpm/--concurrency, beside plain "ob-proxy", to measure what they cost)
 *        --together-rounds N (6; 0: none): each extra target (--baseline, --ops, --postgres) is
 *        also measured side by side with ob-proxy, both under load at the same moment, in N rounds
 *        of fresh processes (bench/together.mjs): the wall-clock figure least disturbed by a shared machine
 *        --same-process (keep each proxy's process for every repetition;
 *        by default each repetition starts every Node proxy anew and warms it up first, for
 *        --warmup seconds per scenario, default 4: a fresh process reaches its steady CPU per
 *        request after 3 to 4 s of load)
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { cpuSeconds, rssKiB, sampleRss, stolenSeconds, syscalls } from './procstat.mjs';
import { measureCli } from './cli.mjs';
import { paired, reduce } from './reduce.mjs';
import { renderReport } from './report.mjs';
import { HELD, PACED, SCENARIOS, bodies } from './scenarios.mjs';
import { OB_BIN, hasNginx, restartable, startNginx, startObProxy, startReference, startUpstream } from './targets.mjs';
import { measureTogether } from './together.mjs';
import { hasWrk, runWrk } from './wrk.mjs';
import { benchDatabase } from './postgres.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const { values: a } = parseArgs({
  options: {
    reps: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    streams: { type: 'string' },
    out: { type: 'string' },
    json: { type: 'string' },
    'no-wrk': { type: 'boolean' },
    'no-nginx': { type: 'boolean' },
    'no-build': { type: 'boolean' },
    'log-level': { type: 'string' },
    smoke: { type: 'boolean' },
    only: { type: 'string' },
    'no-held': { type: 'boolean' },
    'node-flags': { type: 'string' },
    baseline: { type: 'string' },
    'cli-runs': { type: 'string' },
    'no-cli': { type: 'boolean' },
    postgres: { type: 'string' },
    ops: { type: 'boolean' },
    'same-process': { type: 'boolean' },
    preroll: { type: 'string' },
    'together-rounds': { type: 'string' },
  },
});
const smoke = a.smoke === true;
const opts = {
  reps: Number(a.reps ?? (smoke ? 1 : 5)),
  durationS: Number(a.duration ?? (smoke ? 0.5 : 2)),
  warmupS: Number(a.warmup ?? (smoke ? 0.2 : a['same-process'] === true ? 1 : 4)),
  // Held streams: chunks × pace is how long each stays open.
  heldChunks: smoke ? 4 : 20,
  heldPaceMs: smoke ? 100 : 300,
  streams: Number(a.streams ?? (smoke ? 50 : 2000)),
  wrk: a['no-wrk'] !== true && hasWrk(),
  nginx: a['no-nginx'] !== true && hasNginx(),
  logLevel: a['log-level'] ?? 'warn',
  // Same runtime flags for ob-proxy and the reference, so their ratios compare code, not settings.
  nodeFlags: (a['node-flags'] ?? '--max-semi-space-size=8').split(' ').filter(Boolean),
  cliRuns: a['no-cli'] === true ? 0 : Number(a['cli-runs'] ?? (smoke ? 3 : 40)),
  // A Node process settles, under load, into one of two garbage-collection regimes (few objects
  // promoted, or many, with several times the scavenge time: docs/performance.md, "The collection regime") and
  // stays in it; with one process per target, the whole comparison rested on one draw per target.
  restart: a['same-process'] !== true,
  // A proxy left idle while the others are measured (tens of seconds) is slower for its first
  // second or two of load again, by more in a process with more timers of its own:
  // each measured run follows this much of the same load on the same target.
  prerollS: Number(a.preroll ?? (smoke ? 0 : 2)),
  togetherRounds: Number(a['together-rounds'] ?? (smoke ? 1 : 6)),
};
const only = a.only === undefined ? null : new Set(a.only.split(','));
const scenarios = SCENARIOS.filter((sc) => only === null || only.has(sc.id));
if (only !== null && !only.has('cli')) opts.cliRuns = 0;
// A partial run (--only, --no-held) never overwrites the committed full table.
const partial =
  only !== null || a['no-held'] === true || a.baseline !== undefined || a.postgres !== undefined || a.ops === true;
const out = resolve(a.out ?? join(ROOT, partial ? 'bench/results/partial.md' : 'bench/RESULTS.md'));
const jsonOut = resolve(a.json ?? join(ROOT, 'bench/results/latest.json'));
const log = (s) => process.stderr.write(`${s}\n`);

if (a['no-build'] !== true) {
  log('building dist/ …');
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')],
    { stdio: 'inherit' },
  );
}

// The lowdb store at 10,000 keys and 100,000 events, through a daemon's management
// socket (bench/store-scale.mjs); alone with --only store-10k.
if (only?.has('store-10k')) {
  const { renderStoreBench, runStoreBench } = await import('./store-scale.mjs');
  const doc = await runStoreBench({ rounds: smoke ? 5 : 600, reps: smoke ? 1 : 2, nodeArgs: opts.nodeFlags, log });
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(join(ROOT, 'bench/results/store-10k.json'), `${JSON.stringify(doc, null, 2)}\n`);
  log(renderStoreBench(doc));
  if (only.size === 1) process.exit(0);
}

const tmp = mkdtempSync(join(tmpdir(), 'obbench-'));
const files = {};
for (const [k, v] of Object.entries(bodies(opts))) {
  files[k] = join(tmp, `${k}.json`);
  writeFileSync(files[k], v);
}

function runLoadgen(target, sc, { durationMs, warmupMs = 0, once = false, concurrency }) {
  const o = {
    url: target.url,
    path: '/v1/chat/completions',
    headers: target.headers,
    bodyFile: files[sc.body],
    concurrency,
    durationMs,
    warmupMs,
    once,
    expectChunks: sc.expectChunks,
  };
  return new Promise((done, fail) => {
    execFile(
      process.execPath,
      [join(ROOT, 'bench/loadgen.mjs'), JSON.stringify(o)],
      { timeout: 120_000, maxBuffer: 1 << 20 },
      (err, stdout, stderr) => {
        if (err !== null) fail(new Error(`loadgen failed: ${stderr || err.message}`));
        else done(JSON.parse(stdout));
      },
    );
  });
}

/** One measured run: the load, and the target's CPU and peak RSS while it lasted. */
async function measure(target, sc, durationS, warmup = false) {
  const pids = target.pids();
  const cpu0 = cpuSeconds(pids);
  const sys0 = syscalls(pids);
  const rss = sampleRss(pids);
  const r =
    sc.tool === 'wrk' && opts.wrk
      ? await runWrk({
          url: target.url,
          path: '/v1/chat/completions',
          bodyFile: files[sc.body],
          headers: target.headers,
          connections: sc.connections,
          durationS,
          scriptFile: join(tmp, `${target.name}-${sc.id}.lua`),
        })
      : await runLoadgen(target, sc, {
          durationMs: durationS * 1000,
          warmupMs: warmup ? 0 : Math.min(200, durationS * 400),
          concurrency: sc.connections,
        });
  const cpu = cpuSeconds(pids) - cpu0;
  const sys1 = syscalls(pids);
  const peakKiB = rss.stop();
  const per = (n) => (r.requests > 0 ? n / r.requests : null);
  return {
    ...r,
    tool: sc.tool === 'wrk' && opts.wrk ? 'wrk' : 'loadgen',
    cpuUsPerReq: per(cpu * 1e6),
    peakRssMiB: peakKiB / 1024,
    readsPerReq: per(sys1.reads - sys0.reads),
    writesPerReq: per(sys1.writes - sys0.writes),
  };
}

/** The share of all CPUs' time over the run that the hypervisor took (steal), or null. */
function stealShare() {
  const end = stolenSeconds();
  if (stolenStart === null || end === null) return null;
  return (end - stolenStart) / (((Date.now() - started.getTime()) / 1000) * cpus().length);
}

const started = new Date();
const loadStart = loadavg()[0];
const stolenStart = stolenSeconds();
const targets = [];
try {
  const upstream = await startUpstream();
  targets.push(upstream);
  const startOb = (up = upstream.url) => startObProxy(up, { logLevel: opts.logLevel, nodeArgs: opts.nodeFlags });
  targets.push(await restartable(startOb));
  // The extra targets, each measured against ob-proxy: name → how to start a fresh one (on the
  // shared upstream, or on the one given).
  const extras = new Map();
  if (a.baseline !== undefined) {
    const bin = join(resolve(a.baseline), 'dist/bin/ob-proxy.js');
    extras.set('baseline', (up = upstream.url) =>
      startObProxy(up, { logLevel: opts.logLevel, nodeArgs: opts.nodeFlags, name: 'baseline', bin }),
    );
  }
  if (a.ops === true)
    extras.set('ob-proxy-ops', (up = upstream.url) =>
      startObProxy(up, {
        logLevel: opts.logLevel,
        nodeArgs: opts.nodeFlags,
        name: 'ob-proxy-ops',
        ops: true,
      }),
    );
  if (a.postgres !== undefined) {
    // Each process on a database of its own, made here and dropped with it.
    const startPg = async (up = upstream.url) => {
      const db = await benchDatabase(a.postgres);
      const t = await startObProxy(up, {
        logLevel: opts.logLevel,
        nodeArgs: opts.nodeFlags,
        name: 'ob-proxy-pg',
        store: db.url,
      });
      return {
        ...t,
        stop: async () => {
          await t.stop();
          await db.drop();
        },
      };
    };
    extras.set('ob-proxy-pg', startPg);
  }
  for (const start of extras.values()) targets.push(await restartable(() => start()));
  targets.push(await restartable(() => startReference(upstream.url, { nodeArgs: opts.nodeFlags })));
  if (opts.nginx) targets.push(await startNginx(upstream.url));
  log(
    `targets: ${targets.map((t) => `${t.name} ${t.url}`).join(', ')}; wrk ${opts.wrk ? 'yes' : 'no (loadgen instead)'}`,
  );

  // Warm-up: JIT, connection pools and sockets, untimed.
  for (const t of targets) for (const sc of scenarios) await measure(t, sc, opts.warmupS, true);

  const runs = {};
  for (let rep = 0; rep < opts.reps; rep++) {
    if (opts.restart && rep > 0)
      for (const t of targets) {
        if (t.restart === undefined) continue;
        await t.restart();
        for (const sc of scenarios) await measure(t, sc, opts.warmupS, true);
      }
    for (const sc of scenarios) {
      // Targets interleaved within a repetition: drift in the machine's load hits them all alike.
      // The order turns by one each repetition, so no target is always measured right after the
      // same one (in one run with a fixed order, each later target came out a little worse).
      for (let j = 0; j < targets.length; j++) {
        const t = targets[(j + rep) % targets.length];
        if (opts.prerollS > 0) await measure(t, sc, opts.prerollS, true);
        const r = await measure(t, sc, opts.durationS);
        ((runs[sc.id] ??= {})[t.name] ??= []).push(r);
        log(
          `rep ${rep + 1}/${opts.reps} ${sc.id} ${t.name}: ${r.rps?.toFixed(0)} req/s p50 ${r.p50?.toFixed(3)} ms p99 ${r.p99?.toFixed(3)} ms${r.firstP50 != null ? ` first ${r.firstP50.toFixed(3)} ms` : ''} errors ${r.errors + r.non200 + (r.badStreams ?? 0)}`,
        );
      }
    }
  }
  const results = {};
  for (const [id, byTarget] of Object.entries(runs)) {
    results[id] = Object.fromEntries(
      Object.entries(byTarget).map(([n, rs]) => [n, { ...reduce(rs), paired: paired(rs, byTarget) }]),
    );
  }

  // Paced streams: every chunk delivered, in order, each in its own read (none merged or held back).
  const paced = {};
  for (const t of targets)
    paced[t.name] = await runLoadgen(t, PACED, { durationMs: smoke ? 500 : 2000, concurrency: 1 });

  // Held streams: RSS growth while N slow streams are open at once, per stream.
  const held = {};
  for (const t of a['no-held'] === true ? [] : targets) {
    await new Promise((r) => setTimeout(r, 500));
    const pids = t.pids();
    const base = rssKiB(pids);
    const rss = sampleRss(pids, 100);
    const r = await runLoadgen(
      t,
      { ...HELD, expectChunks: opts.heldChunks },
      { once: true, concurrency: opts.streams },
    );
    const peak = rss.stop();
    held[t.name] = {
      ...r,
      baseMiB: base / 1024,
      peakMiB: peak / 1024,
      perStreamKB: ((peak - base) * 1024) / 1000 / opts.streams,
    };
    log(
      `held ${opts.streams} streams ${t.name}: ${r.requests} done, max open ${r.maxOpen}, ${held[t.name].perStreamKB.toFixed(1)} KB each, errors ${r.errors + r.non200 + r.badStreams}`,
    );
  }

  // CLI start-up, with the ob-proxy target's daemon answering the list commands.
  let cli = null;
  if (opts.cliRuns > 0) {
    cli = await measureCli({ bin: OB_BIN, home: targets.find((t) => t.name === 'ob-proxy').home, runs: opts.cliRuns });
    for (const c of cli.commands)
      log(`cli ${c.command}: median ${c.medianMs.toFixed(1)} ms (+${c.overNodeMs.toFixed(1)} ms over node -e 0)`);
  }

  // Each extra target side by side with ob-proxy, both loaded at the same moment (bench/together.mjs).
  const together = {};
  const kinds = ['plain', 'stream'].filter((k) => scenarios.some((sc) => sc.id === `${k}-c64`));
  // Each side on an upstream of its own: one shared upstream serves two loads unevenly.
  const ownUpstream = (start) => async () => {
    const up = await startUpstream();
    try {
      const t = await start(up.url);
      return {
        ...t,
        stop: async () => {
          await t.stop();
          await up.stop();
        },
      };
    } catch (err) {
      await up.stop();
      throw err;
    }
  };
  if (opts.wrk && opts.togetherRounds > 0 && kinds.length > 0)
    for (const [name, start] of extras) {
      const connections = 32;
      const seconds = smoke ? 0.5 : 6;
      const byKind = await measureTogether({
        startA: ownUpstream(startOb),
        startB: ownUpstream(start),
        kinds,
        files,
        tmp,
        rounds: opts.togetherRounds,
        seconds,
        connections,
        warmS: smoke ? 0.2 : opts.warmupS,
        prerollS: smoke ? 0 : 2,
        onRound: ({ round, kind, a: ra, b: rb }) =>
          log(
            `together ${round + 1}/${opts.togetherRounds} ${kind} ${name} ÷ ob-proxy: ${(rb.rps / ra.rps).toFixed(3)}× req/s (${Math.round(rb.rps)} and ${Math.round(ra.rps)}), ${(rb.cpu / ra.cpu).toFixed(3)}× CPU per request`,
          ),
      });
      together[name] = { rounds: opts.togetherRounds, seconds, connections, byKind };
    }

  const doc = {
    started: started.toISOString(),
    finished: new Date().toISOString(),
    load: { start: loadStart, end: loadavg()[0], stolenShare: stealShare() },
    opts,
    targets: targets.map((t) => t.name),
    results,
    paced,
    held,
    cli,
    together,
  };
  // --json and --out may name different folders, and bench/results/ is not in a fresh clone.
  for (const f of [jsonOut, out]) mkdirSync(dirname(f), { recursive: true });
  writeFileSync(jsonOut, `${JSON.stringify(doc, null, 2)}\n`);
  writeFileSync(out, renderReport(doc));
  log(`wrote ${out} and ${jsonOut}`);
} finally {
  for (const t of targets.reverse()) await t.stop();
  rmSync(tmp, { recursive: true, force: true });
}
