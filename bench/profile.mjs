/* global process, console */
/**
 * `node bench/profile.mjs [scenario] [seconds] [--reference | --ops]`: runs one bench scenario (default
 * stream-c64) against ob-proxy (or the reference proxy; `--ops`: metrics and key limits on) started under `node --cpu-prof`, then
 * prints where the proxy's CPU went: self time by function and by source file. The raw
 * .cpuprofile is kept under bench/results/ for Chrome DevTools.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SCENARIOS, bodies } from './scenarios.mjs';
import { startObProxy, startReference, startUpstream } from './targets.mjs';
import { runWrk } from './wrk.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const argv = process.argv.slice(2);
if (argv.includes('--help') || argv.includes('-h')) {
  console.log(
    'node bench/profile.mjs [scenario] [seconds] [--reference | --ops] [--bin CHECKOUT]\n' +
      'One bench scenario (default stream-c64, 5 s) against a daemon under node --cpu-prof: self time by function and by file.\n' +
      `Scenarios: ${SCENARIOS.map((s) => s.id).join(', ')}.`,
  );
  process.exit(0);
}
// --bin DIR: profile another build (a worktree with its own dist/), with this harness and body.
const binAt = argv.indexOf('--bin');
const otherDir = binAt === -1 ? null : resolve(argv[binAt + 1]);
const args = argv.filter((x, i) => !x.startsWith('--') && (binAt === -1 || i !== binAt + 1));
const reference = process.argv.includes('--reference');
// --ops: metrics on and the bench key with limits (what they cost: bench/callgrind.mjs --ops counts it).
const ops = process.argv.includes('--ops');
const sc = SCENARIOS.find((s) => s.id === (args[0] ?? 'stream-c64'));
const seconds = Number(args[1] ?? 5);
const dir = join(
  ROOT,
  'bench/results',
  `prof-${reference ? 'reference' : ops ? 'ob-proxy-ops' : 'ob-proxy'}${otherDir === null ? '' : '-other'}-${sc.id}`,
);
mkdirSync(dir, { recursive: true });
const bodyFile = join(dir, 'body.json');
writeFileSync(bodyFile, bodies()[sc.body]);

const upstream = await startUpstream();
const nodeArgs = ['--cpu-prof', '--cpu-prof-dir', dir];
const target = reference
  ? await startReference(upstream.url, { nodeArgs })
  : await startObProxy(upstream.url, {
      nodeArgs,
      ops,
      ...(otherDir === null ? {} : { bin: join(otherDir, 'dist/bin/ob-proxy.js') }),
    });
const before = new Set(readdirSync(dir));
let r;
try {
  await runWrk({
    url: target.url,
    path: '/v1/chat/completions',
    bodyFile,
    headers: target.headers,
    connections: sc.connections,
    durationS: 1,
    scriptFile: join(dir, 'w.lua'),
  });
  r = await runWrk({
    url: target.url,
    path: '/v1/chat/completions',
    bodyFile,
    headers: target.headers,
    connections: sc.connections,
    durationS: seconds,
    scriptFile: join(dir, 'w.lua'),
  });
} finally {
  await target.stop();
  await upstream.stop();
}
const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile') && !before.has(f));
const prof = JSON.parse(readFileSync(join(dir, file), 'utf8'));
const dt = new Map();
for (let i = 0; i < prof.samples.length; i++)
  dt.set(prof.samples[i], (dt.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
const byFn = new Map();
const byFile = new Map();
let total = 0;
for (const n of prof.nodes) {
  const us = dt.get(n.id) ?? 0;
  total += us;
  const cf = n.callFrame;
  const where =
    cf.url === ''
      ? '(native)'
      : cf.url
          .replace(/^file:\/\//, '')
          .replace(`${ROOT}/`, '')
          .replace(/.*node_modules\//, 'node_modules/');
  const fn = `${cf.functionName || '(anonymous)'} ${where}:${cf.lineNumber + 1}`;
  byFn.set(fn, (byFn.get(fn) ?? 0) + us);
  const key = where.startsWith('node_modules/') ? where.split('/').slice(0, 2).join('/') : where;
  // Idle is not work: kept out of the per-file shares, which are shares of busy time.
  if (cf.functionName !== '(idle)') byFile.set(key, (byFile.get(key) ?? 0) + us);
}
const idle = byFn.get('(idle) (native):0') ?? 0;
const busy = total - idle;
const top = (m, n) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
console.log(
  `${reference ? 'reference' : ops ? 'ob-proxy-ops' : 'ob-proxy'} ${sc.id}: ${r.rps} req/s, ${r.requests} requests; busy ${(busy / 1e3).toFixed(0)} ms of ${(total / 1e3).toFixed(0)} ms sampled; ${(busy / r.requests).toFixed(1)} µs busy per request (profile incl. warm-up)`,
);
console.log('\nself time by function:');
for (const [k, v] of top(byFn, 40))
  console.log(`${((v / busy) * 100).toFixed(1).padStart(5)}% ${(v / r.requests).toFixed(2).padStart(7)} µs  ${k}`);
console.log('\nself time by file:');
for (const [k, v] of top(byFile, 30))
  console.log(`${((v / busy) * 100).toFixed(1).padStart(5)}% ${(v / r.requests).toFixed(2).padStart(7)} µs  ${k}`);
console.log(`\nprofile: ${join(dir, file)}`);
