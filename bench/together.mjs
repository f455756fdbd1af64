/**
 * Two daemons measured at the same time, each under its own wrk at the same connection count, so
 * whatever the machine does in that window (another job, the hypervisor, a change of clock speed)
 * falls on both. Measured seconds apart, as `npm run bench`'s interleaved repetitions are, one
 * build's own throughput moved by ±20 % between repetitions on a shared 2-core VM, and two
 * identical builds differed by up to 6 % in the median of 7 (docs/performance.md, "How to measure").
 *
 * Each round starts both anew (a process keeps the collection regime it settles into), warms
 * both together, then measures both together; which wrk starts first alternates by round. Per
 * round and kind: B's req/s ÷ A's, and B's CPU per request ÷ A's (utime + stime of every thread,
 * /proc). Both share the cores, so absolute figures are about half of a solo run's; the ratio is
 * the result. Used by `npm run bench` for its extra targets.
 */
import { join } from 'node:path';
import { cpuSeconds } from './procstat.mjs';
import { runWrk } from './wrk.mjs';

/**
 * `startA()` / `startB()` make a fresh target: { url, headers, pids(), stop() }. `files`: kind →
 * body file. Returns { [kind]: { rps: [B/A per round], cpu: [B/A per round] } }; `onRound` gets
 * each round's figures as they come.
 */
export async function measureTogether({
  startA,
  startB,
  kinds,
  files,
  tmp,
  rounds,
  seconds,
  connections,
  warmS = 4,
  prerollS = 2,
  onRound = () => {},
}) {
  const load = (t, kind, s) =>
    runWrk({
      url: t.url,
      path: '/v1/chat/completions',
      bodyFile: files[kind],
      headers: t.headers,
      connections,
      durationS: s,
      scriptFile: join(tmp, `together-${kind}-${t.pids()[0]}.lua`),
    });
  /** Both under load at once, the first argument's wrk started first. */
  const both = async (x, y, kind, s) => {
    const cx = cpuSeconds(x.pids());
    const cy = cpuSeconds(y.pids());
    const [rx, ry] = await Promise.all([load(x, kind, s), load(y, kind, s)]);
    const per = (cpu, r) => (cpu * 1e6) / r.requests;
    return [
      { rps: rx.rps, cpu: per(cpuSeconds(x.pids()) - cx, rx), errors: rx.errors + rx.non200 },
      { rps: ry.rps, cpu: per(cpuSeconds(y.pids()) - cy, ry), errors: ry.errors + ry.non200 },
    ];
  };
  const out = Object.fromEntries(kinds.map((k) => [k, { rps: [], cpu: [] }]));
  for (let round = 0; round < rounds; round++) {
    const even = round % 2 === 0;
    // Started in turn too, A first in even rounds and B first in odd ones.
    const first = await (even ? startA : startB)();
    let second = null;
    try {
      second = await (even ? startB : startA)();
      const [A, B] = even ? [first, second] : [second, first];
      for (const k of kinds) if (warmS > 0) await both(A, B, k, warmS);
      for (const k of kinds) {
        if (prerollS > 0) await both(A, B, k, prerollS);
        const [ra, rb] = even ? await both(A, B, k, seconds) : (await both(B, A, k, seconds)).reverse();
        out[k].rps.push(rb.rps / ra.rps);
        out[k].cpu.push(rb.cpu / ra.cpu);
        onRound({ round, kind: k, a: ra, b: rb });
      }
    } finally {
      await first.stop();
      await second?.stop();
    }
  }
  return out;
}
