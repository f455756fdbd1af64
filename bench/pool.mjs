/* global console, process */
/**
 * `node bench/pool.mjs FILE.json …`: the per-run pairs of several `npm run bench` runs (their
 * `--json` files) pooled per scenario and extra target (baseline, ob-proxy-ops, ob-proxy-pg):
 * the median of all pairs, their range and a 90 % interval of that median (report.mjs's
 * bootstrap). One run of 7 repetitions cannot resolve a few percent on a shared machine; the
 * pairs of several runs of the same two builds can, and an A/A run (`--baseline` of this
 * checkout) pooled the same way says how wide the noise alone is.
 */
import { readFileSync } from 'node:fs';
import { median, medianInterval } from './report.mjs';

const files = process.argv.slice(2);
const help = files.includes('--help') || files.includes('-h');
if (files.length === 0 || help) {
  (help ? console.log : console.error)(
    'usage: node bench/pool.mjs FILE.json [FILE.json …]  (files written by bench/run.mjs --json)',
  );
  process.exit(help ? 0 : 2);
}
const pooled = new Map();
for (const file of files) {
  const { results } = JSON.parse(readFileSync(file, 'utf8'));
  for (const [scenario, byTarget] of Object.entries(results))
    for (const [target, r] of Object.entries(byTarget)) {
      const rps = r.paired?.rpsVsObProxyRuns;
      const cpu = r.paired?.cpuVsObProxyRuns;
      if (target === 'ob-proxy' || !Array.isArray(rps)) continue;
      const k = `${scenario} ${target}`;
      const p = pooled.get(k) ?? { rps: [], cpu: [], runs: 0 };
      p.rps.push(...rps);
      p.cpu.push(...(cpu ?? []));
      p.runs++;
      pooled.set(k, p);
    }
}
const show = (xs) => {
  const i = medianInterval(xs);
  if (i === null) return 'too few pairs';
  const med = median(xs);
  return `${med.toFixed(3)}× (90 % interval ${i.lo.toFixed(3)}–${i.hi.toFixed(3)}; pairs ${i.min.toFixed(3)}–${i.max.toFixed(3)})`;
};
for (const [k, p] of pooled)
  console.log(
    `${k} against ob-proxy, ${p.rps.length} pairs from ${p.runs} runs: req/s ${show(p.rps)}; CPU per request ${show(p.cpu)}`,
  );
