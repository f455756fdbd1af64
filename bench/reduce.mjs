/**
 * A scenario's repetitions reduced to one row per target: medians of each figure, and ratios and
 * added latencies as medians of per-repetition pairs.
 */
import { median } from './report.mjs';

/** Medians of each figure over the repetitions; the peak RSS is the largest seen. */
export function reduce(runs) {
  const keys = ['rps', 'p50', 'p99', 'firstP50', 'firstP99', 'cpuUsPerReq', 'readsPerReq', 'writesPerReq'];
  const r = Object.fromEntries(keys.map((k) => [k, median(runs.map((x) => x[k]))]));
  r.peakRssMiB = Math.max(...runs.map((x) => x.peakRssMiB));
  r.requests = runs.reduce((s, x) => s + x.requests, 0);
  r.errors = runs.reduce((s, x) => s + x.errors + x.non200 + (x.badStreams ?? 0), 0);
  r.tool = runs[0]?.tool;
  r.reps = runs.length;
  return r;
}

const num = (x) => typeof x === 'number' && Number.isFinite(x);
const div = (x, y) => (num(x) && num(y) && y !== 0 ? x / y : null);
const sub = (x, y) => (num(x) && num(y) ? x - y : null);

/**
 * Ratios and added latencies as medians of per-repetition pairs: each repetition's figure
 * against the reference's or direct's from the same repetition, seconds apart. A shared VM's
 * speed drifts over a run (seen: a twofold change in ten minutes), which a ratio of medians
 * taken at different moments would carry into the result; a paired ratio cancels it.
 */
export function paired(rs, byTarget) {
  const ref = byTarget.reference;
  const dir = byTarget.direct;
  // The extra targets (baseline, ob-proxy-ops, ob-proxy-pg) against plain ob-proxy, paired alike.
  const ob = byTarget['ob-proxy'];
  const pair = (other, key, op) => (other === undefined ? null : median(rs.map((x, i) => op(x[key], other[i]?.[key]))));
  return {
    rpsVsRef: pair(ref, 'rps', div),
    cpuVsRef: pair(ref, 'cpuUsPerReq', div),
    rpsVsDirect: pair(dir, 'rps', div),
    addedP50: pair(dir, 'p50', sub),
    addedP99: pair(dir, 'p99', sub),
    addedFirstP50: pair(dir, 'firstP50', sub),
    // --postgres: each target against ob-proxy on lowdb, in the same repetition (bench/report-postgres.mjs).
    rpsVsLowdb: pair(byTarget['ob-proxy'], 'rps', div),
    rpsVsObProxy: pair(ob, 'rps', div),
    cpuVsObProxy: pair(ob, 'cpuUsPerReq', div),
    // Every repetition's pair, for the report's interval and for pooling runs (bench/pool.mjs).
    rpsVsObProxyRuns: ob === undefined ? null : rs.map((x, i) => div(x.rps, ob[i]?.rps)),
    cpuVsObProxyRuns: ob === undefined ? null : rs.map((x, i) => div(x.cpuUsPerReq, ob[i]?.cpuUsPerReq)),
  };
}
