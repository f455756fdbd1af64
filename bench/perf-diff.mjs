/* global console, process, setTimeout */
/**
 * `node bench/perf-diff.mjs DIR[+ops|+metrics|+limits] DIR… [--kind plain|stream] [--seconds 8]
 * [--rounds 2]`: where each daemon's CPU goes, all of it. `perf record -e cpu-clock` samples the
 * daemon's every thread, in the kernel too (the writes, the scheduler, the collector's helper
 * threads), which a `--cpu-prof` profile of the main thread cannot see; `--perf-basic-prof`
 * names the JavaScript frames. Each variant is started fresh per round, warmed, then sampled
 * under wrk; prints µs per request by symbol, and the difference of each variant from the first.
 * Needs wrk and perf (a software clock: no hardware counters are needed).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startVariant } from './native-harness.mjs';
import { bodies } from './scenarios.mjs';
import { runWrk } from './wrk.mjs';

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    kind: { type: 'string', default: 'plain' },
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    top: { type: 'string', default: '25' },
  },
});
if (positionals.length === 0) {
  console.error('usage: node bench/perf-diff.mjs DIR[+ops] DIR… [--kind plain|stream] [--seconds S] [--rounds N]');
  process.exit(2);
}
const HZ = 1999;
const ROOT = resolve(import.meta.dirname, '..');
const seconds = Number(a.seconds);
const tmp = mkdtempSync(join(tmpdir(), 'obperf-'));
const bodyFile = join(tmp, 'body.json');
writeFileSync(bodyFile, bodies()[a.kind]);

/** One sampled run: symbol → samples, and the requests served meanwhile. */
async function sample(spec, round) {
  const d = await startVariant(spec, { nodeArgs: ['--perf-basic-prof', '--max-semi-space-size=8'] });
  try {
    const load = (s) =>
      runWrk({
        url: d.url,
        path: '/v1/chat/completions',
        bodyFile,
        headers: { Authorization: `Bearer ${d.secret}` },
        connections: Number(a.connections),
        durationS: s,
        scriptFile: join(tmp, 'wrk.lua'),
      });
    await load(4);
    const out = join(tmp, `perf-${round}.data`);
    const perf = spawn(
      'perf',
      ['record', '-q', '-e', 'cpu-clock', '-F', String(HZ), '-p', String(d.proc.pid), '-o', out],
      {
        stdio: 'ignore',
      },
    );
    await new Promise((r) => setTimeout(r, 300));
    const w = await load(seconds);
    perf.kill('SIGINT');
    await new Promise((r) => perf.once('exit', r));
    const report = execFileSync(
      'perf',
      ['report', '-i', out, '--stdio', '-q', '--no-children', '--sort', 'dso,sym', '-F', 'sample,dso,sym', '-t', '|'],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    const bySym = new Map();
    for (const line of report.split('\n')) {
      const [n, dsoField, symField] = line.split('|');
      if (symField === undefined || !/^\s*\d+\s*$/.test(n)) continue;
      // JIT frames are "[JIT] tid N" (named by --perf-basic-prof): one name for every run.
      const dso = dsoField.trim().replace(/^\[JIT\] tid \d+$/, 'JIT');
      const sym = symField
        .trim()
        .replace(/^\[[.k]\]\s*/, '')
        .replace(/\s+/g, ' ')
        .replace('file:///', '/')
        .replace(`${ROOT}/`, '')
        // Another build's files: named as this one's, so that the same function pairs up.
        .replace(/\/\S*?\/dist\//, 'dist/');
      const name = `${sym.slice(0, 100)} (${dso})`;
      bySym.set(name, (bySym.get(name) ?? 0) + Number(n));
    }
    return { bySym, requests: w.requests, rps: w.rps };
  } finally {
    await d.stop();
  }
}

const results = [];
for (const spec of positionals) results.push({ spec, runs: [] });
for (let round = 0; round < Number(a.rounds); round++) {
  const order = round % 2 === 0 ? results : [...results].reverse();
  for (const r of order) {
    const s = await sample(r.spec, `${results.indexOf(r)}-${round}`);
    r.runs.push(s);
    const total = [...s.bySym.values()].reduce((x, y) => x + y, 0);
    console.log(
      `round ${round + 1} ${r.spec}: ${((total / HZ / s.requests) * 1e6).toFixed(1)} µs per request sampled, ${Math.round(s.rps)} req/s`,
    );
  }
}
if (!process.env.KEEP_PERF) rmSync(tmp, { recursive: true, force: true });
else console.log(`perf data kept in ${tmp}`);

// µs per request by symbol, over all rounds of a variant.
const perReq = results.map((r) => {
  const m = new Map();
  const requests = r.runs.reduce((x, s) => x + s.requests, 0);
  for (const s of r.runs) for (const [k, v] of s.bySym) m.set(k, (m.get(k) ?? 0) + v);
  for (const [k, v] of m) m.set(k, (v / HZ / requests) * 1e6);
  return m;
});
const sum = (m) => [...m.values()].reduce((x, y) => x + y, 0);
const base = perReq[0];
const byDso = (m) => {
  const d = new Map();
  for (const [k, v] of m) {
    const dso = /\(([^()]*)\)$/.exec(k)?.[1] ?? '?';
    d.set(dso, (d.get(dso) ?? 0) + v);
  }
  return d;
};
for (let i = 0; i < results.length; i++) {
  const d = [...byDso(perReq[i])].sort((x, y) => y[1] - x[1]).slice(0, 6);
  console.log(
    `\n${results[i].spec}: ${sum(perReq[i]).toFixed(1)} µs per request (${d.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')})`,
  );
  const rows = [...perReq[i]].sort((x, y) => y[1] - x[1]).slice(0, Number(a.top));
  for (const [k, v] of rows) console.log(`  ${v.toFixed(2).padStart(7)}  ${k}`);
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor((xs.length - 1) / 2)];
for (let i = 1; i < results.length; i++) {
  // Rounds pair up: each variant's run of a round against the first variant's of the same round.
  const cpu = results[i].runs.map((s, k) => {
    const b = results[0].runs[k];
    const t = (x) => [...x.bySym.values()].reduce((p, q) => p + q, 0) / x.requests;
    return t(s) / t(b);
  });
  const rps = results[i].runs.map((s, k) => s.rps / results[0].runs[k].rps);
  const f = (xs) => xs.map((x) => x.toFixed(3)).join(' ');
  console.log(
    `\n${results[i].spec} ÷ ${results[0].spec} per round: CPU per request ${f(cpu)} (median ${median(cpu).toFixed(3)}), req/s ${f(rps)} (median ${median(rps).toFixed(3)})`,
  );
  console.log(`${results[i].spec} − ${results[0].spec}: ${(sum(perReq[i]) - sum(base)).toFixed(1)} µs per request`);
  const keys = new Set([...base.keys(), ...perReq[i].keys()]);
  const diffs = [...keys].map((k) => [k, (perReq[i].get(k) ?? 0) - (base.get(k) ?? 0)]);
  diffs.sort((x, y) => Math.abs(y[1]) - Math.abs(x[1]));
  for (const [k, v] of diffs.slice(0, Number(a.top))) console.log(`  ${(v >= 0 ? '+' : '') + v.toFixed(2)}  ${k}`);
}
