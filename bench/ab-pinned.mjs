/* global console, process */
/**
 * `node bench/ab-pinned.mjs DIR[+ops|+metrics|+limits|+conc|+rpm|+pg] DIR… [--rounds 8] [--kind plain|stream]
 * [--connections 32]`: CPU per request of each daemon on a core of its own, and its collector's
 * work (`--trace-gc-nvp`): scavenges per 1,000 requests, bytes promoted and scavenge pause per
 * request. Scavenges per request measure what a request allocates to within about 1 % from
 * round to round, where CPU per request moves by 10 % and more between fresh processes: a change
 * that allocates less shows there first (docs/performance.md, session 13). This script, and
 * so the upstream, the CLI and wrk it starts, run on CPU 1; each daemon, all its threads, is
 * moved to CPU 0 once it is up. One daemon at a time, fresh each round (3 s of load to warm it,
 * then 4 s measured), the order reversed every other round. Prints each round, then each build's
 * median and range and, for the second and later builds, the ratio of medians to the first's
 * and the per-round ratios. Needs taskset (util-linux), wrk and two CPUs.
 *
 * Why: with the daemon sharing two cores with its upstream and wrk, CPU per request moves with
 * whatever else runs there; on a core of its own it moves with its own work only (and with the
 * collection regime the process settles into, which still splits rounds into two groups about
 * 12 % apart: docs/performance.md, session 9).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gcOfNvp as gcOf } from './gc-nvp.mjs';
import { startVariant } from './native-harness.mjs';
import { cpuSeconds } from './procstat.mjs';
import { bodies } from './scenarios.mjs';
import { median } from './report.mjs';
import { runWrk } from './wrk.mjs';

const { values: a, positionals: specs } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string' },
    kind: { type: 'string' },
    connections: { type: 'string' },
    postgres: { type: 'string' },
  },
});
if (specs.length < 2) {
  console.error('usage: node bench/ab-pinned.mjs DIR[+variant] DIR[+variant] … [--rounds N] [--kind plain|stream]');
  process.exit(2);
}
const rounds = Number(a.rounds ?? 8);
const kind = a.kind ?? 'plain';
const connections = Number(a.connections ?? 32);
// +pg: a database on --postgres, or on a server of the bench's own from npm (bench/postgres.mjs).
const pgServer = a.postgres;

// Everything started from here on inherits CPU 1.
execFileSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
const tmp = mkdtempSync(join(tmpdir(), 'obpin-'));
const file = join(tmp, `${kind}.json`);
writeFileSync(file, bodies()[kind]);
const load = (d, s) =>
  runWrk({
    url: d.url,
    path: '/v1/chat/completions',
    bodyFile: file,
    headers: { Authorization: `Bearer ${d.secret}` },
    connections,
    durationS: s,
    scriptFile: join(tmp, `${d.proc.pid}.lua`),
  });

const cpu = specs.map(() => []);
const scav = specs.map(() => []);
try {
  for (let round = 0; round < rounds; round++) {
    const order = [...specs.keys()];
    if (round % 2 === 1) order.reverse();
    for (const i of order) {
      let nvp = '';
      const d = await startVariant(specs[i], {
        pgServer,
        nodeArgs: ['--max-semi-space-size=8', '--trace-gc-nvp'],
        onStdout: (text) => {
          nvp += text;
        },
      });
      try {
        execFileSync('taskset', ['-a', '-p', '-c', '0', String(d.proc.pid)], { stdio: 'ignore' });
        await load(d, 3);
        nvp = '';
        const c0 = cpuSeconds([d.proc.pid]);
        const r = await load(d, 4);
        const us = ((cpuSeconds([d.proc.pid]) - c0) * 1e6) / r.requests;
        const g = gcOf(nvp);
        cpu[i].push(us);
        scav[i].push((g.scavenges * 1000) / r.requests);
        console.log(
          `round ${round + 1} ${specs[i]}: ${Math.round(r.rps)} req/s, ${us.toFixed(2)} µs CPU per request; ` +
            `${((g.scavenges * 1000) / r.requests).toFixed(3)} scavenges per 1,000 requests, ` +
            `${Math.round(g.promoted / r.requests)} B promoted and ${((g.pauseMs * 1000) / r.requests).toFixed(2)} µs of scavenge per request, ${g.others} other collections`,
        );
      } finally {
        await d.stop();
      }
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

for (const [i, spec] of specs.entries()) {
  const xs = cpu[i];
  const vs =
    i === 0
      ? ''
      : `; ÷ ${specs[0]}: ${(median(xs) / median(cpu[0])).toFixed(3)}× (rounds ${xs.map((v, k) => (v / cpu[0][k]).toFixed(3)).join(', ')})`;
  console.log(
    `${spec}: ${median(xs).toFixed(2)} µs CPU per ${kind} request, median of ${xs.length} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})${vs}`,
  );
  const ss = scav[i];
  console.log(
    `${' '.repeat(spec.length)}  ${median(ss).toFixed(3)} scavenges per 1,000 requests (${Math.min(...ss).toFixed(3)}–${Math.max(...ss).toFixed(3)})` +
      (i === 0 ? '' : `; ÷ ${specs[0]}: ${(median(ss) / median(scav[0])).toFixed(3)}×`),
  );
}
