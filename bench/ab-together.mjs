/* global console, process */
/**
 * `node bench/ab-together.mjs --a DIR[+ops|+pg] --b DIR[+ops|+pg] [--rounds 6] [--seconds 6]
 * [--kinds plain,stream] [--connections 32]`: two daemons measured at the same time, each under
 * its own wrk at the same connection count, in rounds of fresh processes whose sides swap
 * (bench/together.mjs says why and how). Prints each round and the median with a 90 % interval
 * (report.mjs's bootstrap). Needs wrk.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startVariant } from './native-harness.mjs';
import { median, medianInterval } from './report.mjs';
import { bodies } from './scenarios.mjs';
import { measureTogether } from './together.mjs';

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
// +pg: a database on --postgres, or on a server of the bench's own from npm (bench/postgres.mjs).
const pgServer = a.postgres;
const nodeArgs = (a['node-flags'] ?? '--max-semi-space-size=8').split(' ').filter(Boolean);

const tmp = mkdtempSync(join(tmpdir(), 'obab-'));
const files = {};
for (const k of kinds) writeFileSync((files[k] = join(tmp, `${k}.json`)), bodies()[k]);

const start = (spec) => async () => {
  const d = await startVariant(spec, { pgServer, nodeArgs });
  return { url: d.url, headers: { Authorization: `Bearer ${d.secret}` }, pids: () => [d.proc.pid], stop: d.stop };
};

let ratios;
try {
  ratios = await measureTogether({
    startA: start(a.a),
    startB: start(a.b),
    kinds,
    files,
    tmp,
    rounds,
    seconds,
    connections,
    onRound: ({ round, kind, a: ra, b: rb }) =>
      console.log(
        `round ${round + 1} ${kind.padEnd(6)} A ${Math.round(ra.rps)} req/s ${ra.cpu.toFixed(1)} µs/req, B ${Math.round(rb.rps)} req/s ${rb.cpu.toFixed(1)} µs/req: B/A ${(rb.rps / ra.rps).toFixed(3)}× req/s, ${(rb.cpu / ra.cpu).toFixed(3)}× CPU${ra.errors + rb.errors > 0 ? ` (errors ${ra.errors}/${rb.errors})` : ''}`,
      ),
  });
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const show = (xs) => {
  const i = medianInterval(xs);
  return `${median(xs).toFixed(3)}×${i === null ? '' : ` (90 % interval ${i.lo.toFixed(3)}–${i.hi.toFixed(3)}; rounds ${i.min.toFixed(3)}–${i.max.toFixed(3)})`}`;
};
console.log(`A = ${a.a}, B = ${a.b}, ${rounds} rounds of ${seconds} s at ${connections} connections each`);
for (const k of kinds) console.log(`${k}: B/A req/s ${show(ratios[k].rps)}; CPU per request ${show(ratios[k].cpu)}`);
