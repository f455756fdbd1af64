/* global console */
/**
 * `node bench/gc-regime.mjs [--dirs DIR,DIR] [--reps N] [--kinds plain,stream] [--semi MiB]
 * [--node-flags "…"]`: which garbage-collection regime each daemon is in, window by window.
 * Starts `ob-proxy serve` of each checkout (built; default this one) with `--trace-gc-nvp`, all at
 * once, each on an upstream of its own, warms each with 4 s of every kind, then measures them in turn, as
 * `npm run bench` does: per window of 2 s (after 2 s of the same load), req/s, CPU per request,
 * peak RSS, scavenges, mark-compacts and the bytes scavenges promoted per request. A daemon in
 * the cheap regime promotes ~140 B per request at 64 connections; in the other, 5-7 KB, with a
 * mark-compact every few hundred ms (docs/performance.md, session 7). Needs wrk.
 * A dir may end in `+pg` (the PostgreSQL store, in a database of its own on `--postgres URL`,
 * default a server of the bench's own from npm) or `+ops` (metrics on, the bench key with rpm, tpm and concurrency
 * far above the load), or both, to see whether the store or the operations features change the regime.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { gcOfNvp as gcOf } from './gc-nvp.mjs';
import { startVariant } from './native-harness.mjs';
import { cpuSeconds, sampleRss } from './procstat.mjs';
import { bodies } from './scenarios.mjs';
import { runWrk } from './wrk.mjs';

const { values: a } = parseArgs({
  options: {
    dirs: { type: 'string' },
    reps: { type: 'string' },
    kinds: { type: 'string' },
    semi: { type: 'string' },
    'node-flags': { type: 'string' },
    postgres: { type: 'string' },
  },
});
const dirs = (a.dirs ?? resolve(import.meta.dirname, '..')).split(',');
// +pg: a database on --postgres, or on a server of the bench's own from npm (bench/postgres.mjs).
const pgServer = a.postgres;
const kinds = (a.kinds ?? 'plain,stream').split(',');
const reps = Number(a.reps ?? 3);
const nodeArgs = [
  `--max-semi-space-size=${a.semi ?? 8}`,
  '--trace-gc-nvp',
  ...(a['node-flags'] ?? '').split(' ').filter(Boolean),
];

const tmp = mkdtempSync(join(tmpdir(), 'obgc-'));
const files = {};
for (const k of kinds) writeFileSync((files[k] = join(tmp, `${k}.json`)), bodies()[k]);

const daemons = [];
try {
  for (const spec of dirs) {
    const d = { dir: spec, gc: '' };
    daemons.push(d);
    d.daemon = await startVariant(spec, {
      pgServer,
      nodeArgs,
      onStdout: (s) => {
        d.gc += s;
      },
    });
  }
  const load = (d, kind, seconds) =>
    runWrk({
      url: d.daemon.url,
      path: '/v1/chat/completions',
      bodyFile: files[kind],
      headers: { Authorization: `Bearer ${d.daemon.secret}` },
      connections: 64,
      durationS: seconds,
      scriptFile: join(tmp, `${kind}.lua`),
    });
  for (const d of daemons) for (const k of kinds) await load(d, k, 4);
  for (let rep = 0; rep < reps; rep++)
    for (const k of kinds)
      for (const d of daemons) {
        await load(d, k, 2);
        d.gc = '';
        const pids = [d.daemon.proc.pid];
        const rss = sampleRss(pids);
        const cpu0 = cpuSeconds(pids);
        const r = await load(d, k, 2);
        const cpu = cpuSeconds(pids) - cpu0;
        const g = gcOf(d.gc);
        console.log(
          `${rep + 1} ${k.padEnd(6)} ${d.dir}: ${Math.round(r.rps)} req/s, ${Math.round((cpu * 1e6) / r.requests)} µs CPU/req, peak RSS ${Math.round(rss.stop() / 1024)} MiB; ${g.scavenges} scavenges, ${g.others} other collections, ${Math.round(g.promoted / r.requests)} B promoted/req, young generation ${g.minNewMiB}–${g.maxNewMiB} MiB`,
        );
      }
} finally {
  for (const d of daemons) await d.daemon?.stop();
  rmSync(tmp, { recursive: true, force: true });
}
