/* global console, process */
/**
 * `node bench/ab-together.mjs --a DIR[+ops|+pg] --b DIR[+ops|+pg] [--rounds 6] [--seconds 6]
 * [--kinds plain,stream] [--connections 32]`: two daemons measured at the same time, each under
 * its own wrk at the same connection count, so whatever the machine does in that window (another
 * job, the hypervisor, a change of clock speed) falls on both. `npm run bench` measures its
 * targets seconds apart, and on this shared 2-core VM a build's own throughput moved by ±20 %
 * from one repetition to the next while two identical builds differed by up to 4 % in the median
 * of 7 (docs/performance.md, session 8). Each round starts both daemons anew (a process keeps the
 * collection regime it settles into), warms both together, then measures both together; the
 * roles swap sides each round (which wrk starts first). Per round: the ratio B/A of req/s and of
 * CPU per request (utime+stime of the daemon's threads, /proc). Prints each round and the median
 * with a 90 % interval (report.mjs's bootstrap). Both daemons share the cores, so absolute figures
 * are about half of a solo run's; the ratio is the result. Needs wrk.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startVariant } from './native-harness.mjs';
import { cpuSeconds } from './procstat.mjs';
import { medianInterval } from './report.mjs';
import { bodies } from './scenarios.mjs';
import { runWrk } from './wrk.mjs';

const { values: a } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string' },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    kinds: { type: 'string' },
    connections: { type: 'string' },
    postgres: { type: 'string' },
    'node-flags': { type: 'string' },
  },
});
if (a.a === undefined || a.b === undefined) {
  console.error('usage: node bench/ab-together.mjs --a DIR[+ops|+pg] --b DIR[+ops|+pg] [--rounds N] [--seconds S]');
  process.exit(2);
}
const rounds = Number(a.rounds ?? 6);
const seconds = Number(a.seconds ?? 6);
const kinds = (a.kinds ?? 'plain,stream').split(',');
const connections = Number(a.connections ?? 32);
const pgServer = a.postgres ?? 'postgres://postgres@127.0.0.1:5432/test';
const nodeArgs = (a['node-flags'] ?? '--max-semi-space-size=8').split(' ').filter(Boolean);

const tmp = mkdtempSync(join(tmpdir(), 'obab-'));
const files = {};
for (const k of kinds) writeFileSync((files[k] = join(tmp, `${k}.json`)), bodies()[k]);

const start = (spec) => startVariant(spec, { pgServer, nodeArgs });

const load = (d, kind, s) =>
  runWrk({
    url: d.url,
    path: '/v1/chat/completions',
    bodyFile: files[kind],
    headers: { Authorization: `Bearer ${d.secret}` },
    connections,
    durationS: s,
    scriptFile: join(tmp, `${kind}-${d.proc.pid}.lua`),
  });

/** Both under load at once; each one's req/s and CPU per request. */
async function together(x, y, kind, s) {
  const px = [x.proc.pid];
  const py = [y.proc.pid];
  const cx = cpuSeconds(px);
  const cy = cpuSeconds(py);
  const [rx, ry] = await Promise.all([load(x, kind, s), load(y, kind, s)]);
  const cpuX = cpuSeconds(px) - cx;
  const cpuY = cpuSeconds(py) - cy;
  return [
    { rps: rx.rps, cpu: (cpuX * 1e6) / rx.requests, errors: rx.errors + rx.non200 },
    { rps: ry.rps, cpu: (cpuY * 1e6) / ry.requests, errors: ry.errors + ry.non200 },
  ];
}

const ratios = Object.fromEntries(kinds.map((k) => [k, { rps: [], cpu: [] }]));
try {
  for (let round = 0; round < rounds; round++) {
    // Started in turn, A first in even rounds and B first in odd ones.
    const first = await start(round % 2 === 0 ? a.a : a.b);
    const second = await start(round % 2 === 0 ? a.b : a.a);
    const [A, B] = round % 2 === 0 ? [first, second] : [second, first];
    try {
      for (const k of kinds) await together(A, B, k, 4);
      for (const k of kinds) {
        await together(A, B, k, 2);
        const [ra, rb] =
          round % 2 === 0 ? await together(A, B, k, seconds) : (await together(B, A, k, seconds)).reverse();
        ratios[k].rps.push(rb.rps / ra.rps);
        ratios[k].cpu.push(rb.cpu / ra.cpu);
        console.log(
          `round ${round + 1} ${k.padEnd(6)} A ${Math.round(ra.rps)} req/s ${ra.cpu.toFixed(1)} µs/req, B ${Math.round(rb.rps)} req/s ${rb.cpu.toFixed(1)} µs/req: B/A ${(rb.rps / ra.rps).toFixed(3)}× req/s, ${(rb.cpu / ra.cpu).toFixed(3)}× CPU${ra.errors + rb.errors > 0 ? ` (errors ${ra.errors}/${rb.errors})` : ''}`,
        );
      }
    } finally {
      await first.stop();
      await second.stop();
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const med = (xs) => {
  const s = [...xs].sort((p, q) => p - q);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const show = (xs) => {
  const i = medianInterval(xs);
  return `${med(xs).toFixed(3)}×${i === null ? '' : ` (90 % interval ${i.lo.toFixed(3)}–${i.hi.toFixed(3)}; rounds ${i.min.toFixed(3)}–${i.max.toFixed(3)})`}`;
};
console.log(`A = ${a.a}, B = ${a.b}, ${rounds} rounds of ${seconds} s at ${connections} connections each`);
for (const k of kinds) console.log(`${k}: B/A req/s ${show(ratios[k].rps)}; CPU per request ${show(ratios[k].cpu)}`);
