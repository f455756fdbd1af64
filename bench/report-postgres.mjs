/**
 * With --postgres: ob-proxy on the PostgreSQL store against ob-proxy on lowdb, per scenario, as
 * the median of per-repetition ratios (both measured seconds apart in each repetition). The goal
 * is the PostgreSQL store's throughput within 5 % of lowdb's: the request path is the same
 * code on both, so a difference is the usage flush and the change-log reads, or the machine's noise.
 * CPU is the daemon's (bench/procstat.mjs reads the target's own pid): the server's backends are
 * not counted here, since the server may be shared; bench/pg-cost.mjs counts them apart.
 */
const f = (v, d = 2) => (v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(d));

export function postgresSection(doc) {
  const rows = Object.entries(doc.results).filter(
    ([, byTarget]) => byTarget['ob-proxy-pg'] !== undefined && byTarget['ob-proxy'] !== undefined,
  );
  if (rows.length === 0) return [];
  return [
    '## PostgreSQL store vs lowdb',
    '',
    'Medians of per-repetition ratios, `ob-proxy-pg` req/s over `ob-proxy` (lowdb) req/s. Goal: at least 0.95.',
    "CPU is the daemon's alone: the PostgreSQL server's processes are not counted (the server given by `--postgres`",
    'may serve others too); `bench/pg-cost.mjs` counts them on a server of its own (docs/scale-out.md, "Throughput").',
    '',
    '| scenario | lowdb req/s | PostgreSQL req/s | PostgreSQL / lowdb | lowdb CPU µs/req | PostgreSQL CPU µs/req | goal met |',
    '|---|---|---|---|---|---|---|',
    ...rows.map(([id, t]) => {
      const ratio = t['ob-proxy-pg'].paired?.rpsVsLowdb;
      return `| \`${id}\` | ${f(t['ob-proxy'].rps, 0)} | ${f(t['ob-proxy-pg'].rps, 0)} | ${f(ratio)} | ${f(t['ob-proxy'].cpuUsPerReq, 0)} | ${f(t['ob-proxy-pg'].cpuUsPerReq, 0)} | ${ratio == null ? '—' : ratio >= 0.95 ? 'yes' : '**no**'} |`;
    }),
    '',
  ];
}
