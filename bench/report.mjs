/* global process */
/**
 * Renders one bench run as Markdown: the machine, one table per scenario with ratios to the
 * direct and reference runs of the same run, the targets checked, streams held.
 */
import { spawnSync } from 'node:child_process';
import { cpus, release, totalmem } from 'node:os';
import { SCENARIOS } from './scenarios.mjs';
import { postgresSection } from './report-postgres.mjs';

const f = (v, d = 2) => (v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(d));
const signed = (v, d = 3) =>
  v === null || v === undefined || !Number.isFinite(v) ? '—' : `${v >= 0 ? '+' : ''}${v.toFixed(d)}`;
const ratio = (x, y) => (x == null || y == null || y === 0 ? null : x / y);
const diff = (x, y) => (x == null || y == null ? null : x - y);
/** The median of per-repetition pairs (bench/run.mjs), or, for older JSON, the figure from medians. */
const pairedOr = (r, key, fallback) => r?.paired?.[key] ?? fallback;

/** The median of finite numbers (the middle two averaged); null when there are none. */
export function median(xs) {
  const b = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((x, y) => x - y);
  if (b.length === 0) return null;
  const m = b.length >> 1;
  return b.length % 2 === 1 ? b[m] : (b[m - 1] + b[m]) / 2;
}

/**
 * The per-run pairs' range and a 90 % interval of their median (bootstrap, 2,000 resamples with a
 * fixed seed, so the same runs print the same interval): how far the median itself may be off.
 * Two identical builds measured against each other (`--baseline` of this checkout) show the noise.
 */
export function medianInterval(xs, resamples = 2000) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x));
  if (v.length < 3) return null;
  let seed = 0x9e3779b9;
  const rand = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const meds = [];
  for (let k = 0; k < resamples; k++) meds.push(median(v.map(() => v[Math.floor(rand() * v.length)])));
  meds.sort((x, y) => x - y);
  return {
    min: Math.min(...v),
    max: Math.max(...v),
    lo: meds[Math.floor(0.05 * resamples)],
    hi: meds[Math.ceil(0.95 * resamples) - 1],
  };
}

function spread(xs) {
  const i = xs == null ? null : medianInterval(xs);
  return i === null
    ? ''
    : ` (per run ${i.min.toFixed(3)}–${i.max.toFixed(3)}; 90 % interval of the median ${i.lo.toFixed(3)}–${i.hi.toFixed(3)})`;
}

function version(cmd, args) {
  // nginx -v and wrk --version print on stderr, and wrk exits 1.
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error !== undefined) return `${cmd} not installed`;
  const line = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0] ?? '';
  return line.replace(/ Copyright.*$/, '');
}

export function machine(load) {
  const c = cpus();
  return [
    `- CPU: ${c.length} × ${c[0]?.model ?? 'unknown'}; memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB; Linux ${release()}`,
    `- Node ${process.version}; ${version('wrk', ['--version'])}; ${version('nginx', ['-v'])}`,
    '- Load generator, proxy and upstream share these cores (all on 127.0.0.1); the machine may be shared with other work.',
    ...(load === undefined
      ? []
      : [
          `- Load average (1 min) at the start and end of the run: ${load.start.toFixed(2)} and ${load.end.toFixed(2)} (above 0 means other work competed for the cores; p99 figures suffer first)`,
        ]),
    ...(load?.stolenShare == null
      ? []
      : [
          `- CPU time taken by the hypervisor during the run (steal): ${(100 * load.stolenShare).toFixed(1)} % of both cores' time. Above a few percent, absolute figures are not comparable with other runs'; the paired ratios still are.`,
        ]),
  ].join('\n');
}

function scenarioTable(sc, byTarget) {
  const d = byTarget.direct;
  const ref = byTarget.reference;
  const first = sc.tool === 'loadgen';
  const head = [
    'target',
    'req/s',
    'p50 ms',
    'p99 ms',
    ...(first ? ['first chunk p50 ms', 'first chunk p99 ms'] : []),
    'proxy CPU µs/req',
    'proxy syscalls/req (read+write)',
    'peak RSS MiB',
    '× direct req/s',
    '× reference req/s',
    'added p50 ms',
    'added p99 ms',
    ...(first ? ['added first chunk p50 ms'] : []),
  ];
  const rows = Object.entries(byTarget).map(([name, r]) => [
    name,
    f(r.rps, 0),
    f(r.p50, 3),
    f(r.p99, 3),
    ...(first ? [f(r.firstP50, 3), f(r.firstP99, 3)] : []),
    name === 'direct' ? '—' : f(r.cpuUsPerReq, 0),
    name === 'direct' ? '—' : `${f(r.readsPerReq, 1)}+${f(r.writesPerReq, 1)}`,
    f(r.peakRssMiB, 1),
    f(pairedOr(r, 'rpsVsDirect', ratio(r.rps, d?.rps))),
    f(pairedOr(r, 'rpsVsRef', ratio(r.rps, ref?.rps))),
    name === 'direct' ? '—' : signed(pairedOr(r, 'addedP50', diff(r.p50, d?.p50))),
    name === 'direct' ? '—' : signed(pairedOr(r, 'addedP99', diff(r.p99, d?.p99))),
    ...(first ? [name === 'direct' ? '—' : signed(pairedOr(r, 'addedFirstP50', diff(r.firstP50, d?.firstP50)))] : []),
  ]);
  const errs = Object.entries(byTarget)
    .filter(([, r]) => r.errors > 0)
    .map(([n, r]) => `${n}: ${r.errors} failed`);
  const extra = Object.entries(byTarget)
    .filter(([n, r]) => !['direct', 'ob-proxy', 'reference', 'nginx'].includes(n) && r.paired?.rpsVsObProxy != null)
    .map(
      ([n, r]) =>
        `- ${n} against ob-proxy, medians of the per-run pairs: ${f(r.paired.rpsVsObProxy, 3)}× the req/s${spread(r.paired.rpsVsObProxyRuns)}, ${f(r.paired.cpuVsObProxy, 3)}× the CPU per request${spread(r.paired.cpuVsObProxyRuns)}.`,
    );
  return [
    `### ${sc.title}`,
    '',
    `\`${sc.id}\`, measured with ${byTarget.direct?.tool ?? '?'}; medians of ${byTarget.direct?.reps ?? '?'} runs (ratios and added latencies: medians of the per-run pairs).${errs.length > 0 ? ` **Errors: ${errs.join(', ')}.**` : ''}`,
    '',
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
    ...(extra.length > 0 ? [...extra, ''] : []),
  ].join('\n');
}

/** The targets for ob-proxy, each with the figure measured and whether it is met. */
export function checkTargets(doc) {
  const r = doc.results;
  const ob = (id) => r[id]?.['ob-proxy'];
  const ref = (id) => r[id]?.reference;
  const dir = (id) => r[id]?.direct;
  const peak64 = Math.max(ob('plain-c64')?.peakRssMiB ?? 0, ob('stream-c64')?.peakRssMiB ?? 0);
  const paced = doc.paced['ob-proxy'];
  const held = doc.held['ob-proxy'];
  const rows = [
    [
      'non-streaming req/s at 64 connections vs reference',
      '≥ 0.80×',
      pairedOr(ob('plain-c64'), 'rpsVsRef', ratio(ob('plain-c64')?.rps, ref('plain-c64')?.rps)),
      (v) => v >= 0.8,
      (v) => `${f(v)}×`,
    ],
    [
      'added p50 at 1 connection',
      '≤ 0.2 ms',
      pairedOr(ob('plain-c1'), 'addedP50', diff(ob('plain-c1')?.p50, dir('plain-c1')?.p50)),
      (v) => v <= 0.2,
      (v) => `${f(v, 3)} ms`,
    ],
    [
      'added p99 at 1 connection',
      '≤ 1 ms',
      pairedOr(ob('plain-c1'), 'addedP99', diff(ob('plain-c1')?.p99, dir('plain-c1')?.p99)),
      (v) => v <= 1,
      (v) => `${f(v, 3)} ms`,
    ],
    [
      'added time to first chunk (p50, 1 connection)',
      '≤ 0.5 ms',
      pairedOr(ob('stream-c1'), 'addedFirstP50', diff(ob('stream-c1')?.firstP50, dir('stream-c1')?.firstP50)),
      (v) => v <= 0.5,
      (v) => `${f(v, 3)} ms`,
    ],
    [
      'streaming req/s at 64 connections vs reference',
      '≥ 0.80×',
      pairedOr(ob('stream-c64'), 'rpsVsRef', ratio(ob('stream-c64')?.rps, ref('stream-c64')?.rps)),
      (v) => v >= 0.8,
      (v) => `${f(v)}×`,
    ],
    [
      'paced streams: chunks lost / merged into one read',
      '0 / 0',
      paced === undefined ? null : paced.badStreams + paced.errors + paced.non200 + paced.mergedReads,
      (v) => v === 0 && paced.requests > 0,
      () => `${paced.badStreams + paced.errors + paced.non200} / ${paced.mergedReads} over ${paced.requests} streams`,
    ],
    [
      'proxy CPU per request vs reference (non-streaming, 64 conns)',
      '≤ 1.5×',
      pairedOr(ob('plain-c64'), 'cpuVsRef', ratio(ob('plain-c64')?.cpuUsPerReq, ref('plain-c64')?.cpuUsPerReq)),
      (v) => v <= 1.5,
      (v) => `${f(v)}× (${f(ob('plain-c64')?.cpuUsPerReq, 0)} vs ${f(ref('plain-c64')?.cpuUsPerReq, 0)} µs)`,
    ],
    [
      'proxy CPU per request vs reference (streaming, 64 conns)',
      '≤ 1.5×',
      pairedOr(ob('stream-c64'), 'cpuVsRef', ratio(ob('stream-c64')?.cpuUsPerReq, ref('stream-c64')?.cpuUsPerReq)),
      (v) => v <= 1.5,
      (v) => `${f(v)}× (${f(ob('stream-c64')?.cpuUsPerReq, 0)} vs ${f(ref('stream-c64')?.cpuUsPerReq, 0)} µs)`,
    ],
    ['peak RSS at 64 connections', '≤ 150 MiB', peak64, (v) => v <= 150, (v) => `${f(v, 1)} MiB`],
    [
      `RSS per held stream (${doc.opts.streams} open)`,
      '≤ 40 KB',
      held?.perStreamKB ?? null,
      (v) => v <= 40 && held.maxOpen === doc.opts.streams,
      (v) => `${f(v, 1)} KB (${held.maxOpen} open at once)`,
    ],
  ];
  return rows.map(([what, target, v, ok, show]) => ({
    what,
    target,
    value: v,
    shown: v === null ? '—' : show(v),
    met: v !== null && ok(v),
  }));
}

/** CLI start-up (bench/cli.mjs); the goal is at most 100 ms wall for these commands. */
function cliSection(cli) {
  if (cli == null) return [];
  return [
    '## CLI start-up',
    '',
    `Wall time from spawn to exit, ${cli.runs} interleaved rounds, median (Node ${cli.node}, started as \`node dist/bin/ob-proxy.js\`); the list commands ask the running ob-proxy target. Goal: at most 100 ms.`,
    '',
    '| command | median ms | over `node -e 0` ms | min ms | max ms | goal met |',
    '|---|---|---|---|---|---|',
    ...cli.commands.map(
      (c) =>
        `| \`${c.command}\` | ${f(c.medianMs, 1)} | ${c.command === 'node -e 0' ? '—' : f(c.overNodeMs, 1)} | ${f(c.minMs, 1)} | ${f(c.maxMs, 1)} | ${c.command === 'node -e 0' ? '—' : c.medianMs <= 100 ? 'yes' : '**no**'} |`,
    ),
    '',
  ];
}

/** The extra targets side by side with ob-proxy (bench/together.mjs); absent in older JSON. */
export function togetherSection(together) {
  const entries = Object.entries(together ?? {});
  if (entries.length === 0) return [];
  const cell = (xs) => {
    const i = medianInterval(xs);
    return `${f(median(xs), 3)}×${i === null ? '' : ` (${i.lo.toFixed(3)}–${i.hi.toFixed(3)})`}`;
  };
  const [, first] = entries[0];
  return [
    '## Side by side: each extra target and ob-proxy under load at the same moment',
    '',
    `Each round starts both anew, warms both together, then loads both at once, each with its own upstream and its own wrk at ${first.connections} connections for ${first.seconds} s; which wrk starts first alternates (bench/together.mjs). Whatever the shared machine does in that window falls on both, so these ratios are much steadier than the interleaved ones above (two identical builds: 0.987× and 1.006×). Medians of the rounds' ratios (target ÷ ob-proxy), with a 90 % bootstrap interval.`,
    '',
    '| target ÷ ob-proxy | rounds | non-streaming req/s | CPU per request | streaming req/s | CPU per stream |',
    '|---|---|---|---|---|---|',
    ...entries.map(
      ([n, t]) =>
        `| ${n} | ${t.rounds} | ${t.byKind.plain ? cell(t.byKind.plain.rps) : '—'} | ${t.byKind.plain ? cell(t.byKind.plain.cpu) : '—'} | ${t.byKind.stream ? cell(t.byKind.stream.rps) : '—'} | ${t.byKind.stream ? cell(t.byKind.stream.cpu) : '—'} |`,
    ),
    '',
  ];
}

export function renderReport(doc) {
  const targets = checkTargets(doc);
  const o = doc.opts;
  const parts = [
    '# ob-proxy benchmark results',
    '',
    `Written by \`npm run bench\` (bench/run.mjs) on ${doc.finished}. Do not edit by hand: re-run.`,
    '',
    '## Machine',
    '',
    machine(doc.load),
    '',
    '## Method',
    '',
    `Targets: ${doc.targets.join(', ')}; \`direct\` is the fixed-body upstream (bench/upstream.mjs) without a proxy, the limit; \`reference\` is bench/reference-proxy.mjs, a ~100-line node:http + undici Pool proxy with no auth or validation; ob-proxy runs as \`node ${o.nodeFlags.join(' ')} dist/bin/ob-proxy.js serve --log-level ${o.logLevel}\` with an instance made ready through the CLI; the reference runs with the same Node flags (${o.nodeFlags.length === 0 ? 'none' : o.nodeFlags.join(' ')}).`,
    `Each scenario: ${o.warmupS} s warm-up per target, then ${o.reps} repetitions of ${o.durationS} s, targets interleaved within each repetition${o.restart ? '; before each repetition after the first, every Node proxy is started anew and warmed up again (a process keeps the garbage-collection regime it settles into, so repetitions of one process are not independent draws)' : '; one process per target for the whole run'}${o.prerollS > 0 ? `; each measured run follows ${o.prerollS} s of the same load on the same target` : ''}; the tables show medians (peak RSS: the maximum). Load: ${o.wrk ? 'wrk -t1 (a separate process)' : 'bench/loadgen.mjs (wrk not installed)'} for throughput and latency; bench/loadgen.mjs (a separate Node process) for time to first chunk and stream checks.`,
    "Proxy CPU is utime+stime of the proxy's processes from /proc over the run, divided by the requests completed. Ratios and added latencies are medians of per-repetition pairs: each repetition's figure against the reference's (or direct's) from the same repetition, measured seconds apart, so a drift in the machine's speed over the run cancels out instead of landing in the ratio.",
    '',
    '## Targets (ob-proxy)',
    '',
    '| target | goal | measured | met |',
    '|---|---|---|---|',
    ...targets.map((t) => `| ${t.what} | ${t.target} | ${t.shown} | ${t.met ? 'yes' : '**no**'} |`),
    '',
    '## Scenarios',
    '',
    ...SCENARIOS.filter((sc) => doc.results[sc.id] !== undefined).map((sc) => scenarioTable(sc, doc.results[sc.id])),
    '### Paced streams (16 chunks, 5 ms apart, 1 connection)',
    '',
    '| target | streams | incomplete or out of order | reads holding 2+ chunks | first chunk p50 ms | total p50 ms |',
    '|---|---|---|---|---|---|',
    ...Object.entries(doc.paced).map(
      ([n, r]) =>
        `| ${n} | ${r.requests} | ${r.badStreams + r.errors + r.non200} | ${r.mergedReads} | ${f(r.firstP50, 3)} | ${f(r.p50, 3)} |`,
    ),
    '',
    `### ${o.streams} concurrent slow streams (${o.heldChunks} chunks, ${o.heldPaceMs} ms apart)`,
    '',
    '| target | completed | failed | max open at once | RSS before MiB | peak RSS MiB | KB per stream |',
    '|---|---|---|---|---|---|---|',
    ...Object.entries(doc.held).map(
      ([n, r]) =>
        `| ${n}${n === 'direct' ? ' (the upstream itself)' : ''} | ${r.requests} | ${r.errors + r.non200 + r.badStreams}${r.errorSamples?.length > 0 ? ` (${r.errorSamples.join('; ')})` : ''} | ${r.maxOpen} | ${f(r.baseMiB, 1)} | ${f(r.peakMiB, 1)} | ${f(r.perStreamKB, 1)} |`,
    ),
    '',
    ...togetherSection(doc.together),
    ...cliSection(doc.cli),
    ...postgresSection(doc),
  ];
  return `${parts.join('\n')}\n`;
}
