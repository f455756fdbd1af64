/* global process, console, setTimeout, Buffer */
/**
 * `node bench/alloc-sites.mjs [--variants plain,ops] [--requests N] [--warmup N] [--stream]
 * [--top N]`: where the JavaScript heap bytes of a request are allocated, by function, in each
 * variant (as in bench/ops-counters.mjs; `kind@DIR` runs another checkout), and each variant
 * against the first. V8's sampling heap profiler (bench/alloc-sampler.mjs) records one object
 * per 256 bytes on average, collected ones included, over `--requests` after `--warmup`: the
 * per-function figures move by tens of bytes per request from run to run, so a difference of a
 * few hundred bytes at one site is real, where whole-heap totals of two daemons differ by more
 * than that (docs/performance.md, session 6).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
    top: { type: 'string' },
  },
});
const N = Number(a.requests ?? 10000);
const WARM = Number(a.warmup ?? 20000);
const C = Number(a.concurrency ?? 64);
const TOP = Number(a.top ?? 25);
const variants = (a.variants ?? 'plain,ops').split(',');
const body = Buffer.from(bodies()[a.stream === true ? 'stream' : 'plain']);
const SAMPLER = resolve(import.meta.dirname, 'alloc-sampler.mjs');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Bytes per request by function (name, file and line), and in all. */
function bySite(profile, n) {
  const sites = new Map();
  let total = 0;
  const walk = (node) => {
    const f = node.callFrame;
    const file = f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/');
    const site = `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}`;
    if (node.selfSize > 0) {
      sites.set(site, (sites.get(site) ?? 0) + node.selfSize / n);
      total += node.selfSize / n;
    }
    for (const c of node.children) walk(c);
  };
  walk(profile.head);
  return { sites, total };
}

const dir = mkdtempSync(join(tmpdir(), 'oballoc-'));
const upstream = await startUpstream();
const results = [];
try {
  for (const v of variants) {
    const [kind, checkout] = v.split('@');
    const out = join(dir, `${results.length}.json`);
    process.env.ALLOC_SAMPLE_OUT = out;
    const t = await startObProxy(upstream.url, {
      name: v,
      bin: checkout === undefined ? OB_BIN : join(resolve(checkout), 'dist/bin/ob-proxy.js'),
      nodeArgs: ['--max-semi-space-size=4', '--import', SAMPLER],
      ...VARIANTS[kind],
    });
    try {
      const pid = t.pids()[0];
      await send(t.url, t.headers, body, WARM, C);
      process.kill(pid, 'SIGUSR2');
      await sleep(300);
      await send(t.url, t.headers, body, N, C);
      process.kill(pid, 'SIGUSR2');
      for (let i = 0; i < 100 && !existsSync(out); i++) await sleep(100);
      results.push({ v, ...bySite(JSON.parse(readFileSync(out, 'utf8')), N) });
    } finally {
      await t.stop();
    }
  }
} finally {
  await upstream.stop();
  rmSync(dir, { recursive: true, force: true });
}

const first = results[0];
for (const r of results) {
  console.log(`\n${r.v}: ${Math.round(r.total)} bytes per ${a.stream === true ? 'stream' : 'request'}, sampled`);
  const rows =
    r === first
      ? [...r.sites].sort((x, y) => y[1] - x[1]).slice(0, TOP)
      : [...new Set([...r.sites.keys(), ...first.sites.keys()])]
          .map((s) => [s, (r.sites.get(s) ?? 0) - (first.sites.get(s) ?? 0)])
          .sort((x, y) => Math.abs(y[1]) - Math.abs(x[1]))
          .slice(0, TOP);
  if (r !== first) console.log(`  against ${first.v}: ${Math.round(r.total - first.total)} bytes; by site:`);
  for (const [s, b] of rows) console.log(`${String(Math.round(b)).padStart(8)}  ${s}`);
}
