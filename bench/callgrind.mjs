/* global process, console, Buffer, URL */
/**
 * `node bench/callgrind.mjs [--dir CHECKOUT] [--streams 2000] [--warmup 30000] [--concurrency 8]
 * [--body stream|plain|responses|responses-stream|messages|messages-stream] [--env K=V] [--functions N] [--label NAME] [--ops]`: instructions the daemon
 * executes per request, counted by `valgrind --tool=callgrind` over a fixed number of requests.
 * Wall time on a shared machine moves by ±10 % between runs; an instruction count does not depend
 * on the load, so this is how two builds (or a build with one candidate switched off) are
 * compared. The daemon (CHECKOUT's dist/, default this one) runs under callgrind with
 * `--single-threaded` (no V8 helper threads racing with the count); the upstream and the client
 * run natively. Start-up, the CLI's set-up calls and the warm-up run uncounted
 * (`--instr-atstart=no`, so they cost valgrind's plain translation, not callgrind's); counting is
 * switched on after the warm-up (`callgrind_control -i on`) and dumped after the measured
 * requests. The warm-up is long because V8 is still tiering the request path up after a few
 * thousand requests: with 3,000 the window held about 100,000 compiler instructions a request
 * and the program's own work moved by 4 % between runs of one build; with 30,000, 17,500 and
 * under 1 %. The report splits off V8's collector, its compilers and the write barrier's slow
 * path (`gcPerRequest`, `compilerPerRequest`, `barrierPerRequest`): whether a full collection
 * falls inside the window moves the total, while the rest, the program's own work
 * (`mutatorPerRequest`), is the figure to compare. The dump stays in
 * bench/results/callgrind/ for callgrind_annotate. `--functions N` prints the N functions that
 * executed most instructions per request, JavaScript ones named through V8's `--perf-basic-prof`
 * map (callgrind itself sees only addresses in JIT code). `--usage-log`: the per-request usage
 * log on (`--usage-log` in the run's home, its lines checked after). `--ops`: metrics on and a key with every
 * limit, as the bench's `ob-proxy-ops` target. `--pack`: the instance has a pack end (30 days on),
 * so every answer carries the pack's header. About 2 minutes at the defaults.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './scenarios.mjs';
import { freePort, startServe } from './serve.mjs';
import { startUpstream } from './targets.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const USAGE = `node bench/callgrind.mjs [options]: instructions ob-proxy executes per request, under callgrind

  --dir CHECKOUT     the built checkout to count (default this one)
  --body KIND        stream (64 chunks, the default) or plain; responses-stream (64 text
                     events) or responses: the same, through POST /v1/responses;
                     messages-stream or messages: through POST /v1/messages
  --streams N        requests counted (2000)
  --warmup N         requests sent before counting (30000)
  --concurrency N    connections (8)
  --ops              metrics on and a key with every limit
  --pack             the instance has a pack end, so every answer carries its header
  --usage-log        the per-request usage log on, written into the run's home
  --env K=V          more environment for the daemon (repeatable)
  --functions N      also print the N costliest functions
  --label NAME       the dump's name in bench/results/callgrind/
  --no-reference     count ob-proxy alone, not also the reference proxy

Prints one JSON line: perRequest, and mutatorPerRequest, the program's own work without V8's
collector, compilers and write barrier: the figure to compare. Then the same counted for the
reference proxy (bench/reference-proxy.mjs: undici's Pool.dispatch, no auth, no parsing) in the
same run, and ratio, ob-proxy's mutator instructions over the reference's. Needs valgrind; about
4 minutes (2 with --no-reference).`;
const { values: a } = parseArgs({
  options: {
    dir: { type: 'string' },
    streams: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    body: { type: 'string' },
    env: { type: 'string', multiple: true },
    label: { type: 'string' },
    functions: { type: 'string' },
    ops: { type: 'boolean' },
    pack: { type: 'boolean' },
    'usage-log': { type: 'boolean' },
    'no-reference': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (a.help === true) {
  console.log(USAGE);
  process.exit(0);
}
const dir = resolve(a.dir ?? ROOT);
const n = Number(a.streams ?? 2000);
const warm = Number(a.warmup ?? 30000);
const conc = Number(a.concurrency ?? 8);
const kind = a.body ?? 'stream';
const body = Buffer.from(bodies()[kind]);
const extraEnv = Object.fromEntries(
  (a.env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const out = join(ROOT, 'bench/results/callgrind');
mkdirSync(out, { recursive: true });
const label =
  a.label ??
  `${dir === ROOT ? 'this' : dir.split('/').pop()}-${kind}${a.ops === true ? '-ops' : ''}${a.pack === true ? '-pack' : ''}${a['usage-log'] === true ? '-usagelog' : ''}`;
const NODE = process.execPath;
const functions = Number(a.functions ?? 0);
// As `npm run bench -- --ops`: metrics on, and the requests sent with a key that has every limit.
const ops = a.ops === true;
const metricsPort = ops ? await freePort() : null;

/** Where `kind`'s body is sent, and the end its stream's answer must have. */
function routeOf(kind) {
  if (kind.startsWith('responses')) return { path: '/v1/responses', end: /event: response\.completed\ndata: .*\}$/ };
  if (kind.startsWith('messages')) return { path: '/v1/messages', end: /event: message_stop\ndata: .*\}$/ };
  return { path: '/v1/chat/completions', end: /data: \[DONE\]$/ };
}

/** `count` requests of `body`, `conc` at a time over `agent`'s keep-alive sockets; every answer read whole and checked. */
async function drive(agent, url, secret, body, kind, count, conc) {
  const headers = {
    authorization: `Bearer ${secret}`,
    'content-type': 'application/json',
    'content-length': String(body.length),
  };
  let next = 0;
  let bad = 0;
  const route = routeOf(kind);
  const streamed = kind.endsWith('stream');
  const one = () =>
    new Promise((done) => {
      const req = request(new URL(route.path, url), { method: 'POST', agent, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (s) => {
          text += s;
        });
        res.on('end', () => {
          if (res.statusCode !== 200 || (streamed && !route.end.test(text.trimEnd()))) bad++;
          done();
        });
      });
      req.on('error', () => {
        bad++;
        done();
      });
      req.end(body);
    });
  const worker = async () => {
    while (next < count) {
      next++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  if (bad > 0) throw new Error(`${bad} of ${count} requests failed`);
}

/** The bench key's limits for `+ops`: far above any load here, so every request is checked and counted, none refused. */
export const OPS_KEY = ['--rpm', '1000000000', '--tpm', '1000000000', '--concurrency', '1000000'];
function cli(home, args) {
  return new Promise((done, fail) => {
    execFile(
      NODE,
      [join(dir, 'dist/bin/ob-proxy.js'), ...args, '--home', home, '--json'],
      { timeout: 300_000 },
      (err, stdout, stderr) => {
        if (err !== null) fail(new Error(`ob-proxy ${args.join(' ')}: ${stderr}`));
        else done(JSON.parse(stdout));
      },
    );
  });
}

function summary(file) {
  const m = /^(?:summary|totals): (\d+)/m.exec(readFileSync(file, 'utf8'));
  if (m === null) throw new Error(`no totals in ${file}`);
  return Number(m[1]);
}

/** callgrind_annotate's self cost per function: [name, instructions], the frames every instruction runs under left out. */
function selfCosts(dumpFile) {
  const text = execFileSync('callgrind_annotate', ['--threshold=100', dumpFile], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const rows = [];
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (m === null) continue;
    const v = Number(m[1].replaceAll(',', ''));
    if (m[2].includes('PROGRAM TOTALS')) total = v;
    // main, the event loop: the frames every instruction runs under, not a function's own cost.
    else if (v !== total) rows.push([m[2], v]);
  }
  return rows;
}

// V8's collector and its optimising compilers: their share per request depends on when a full
// collection or a tier-up falls inside the measured window, so the report gives them apart.
const GC =
  /Heap|Scaveng|heap::|Marking|MarkCompact|IterateObjectCache|Evacuat|Sweeper|RecordMigrated|RememberedSet|MemoryAllocator|FreeList|BodyDescriptor/;
const COMPILER = /compiler::|maglev::|turboshaft|Turbofan|Maglev|Compile|Parser|Bytecode|interpreter::/;
// The write barrier's slow path runs while a full collection is marking: it follows the collector.
const BARRIER = /RecordWrite|WriteBarrier/;

function shares(rows) {
  let gc = 0;
  let compiler = 0;
  let barrier = 0;
  for (const [name, v] of rows) {
    if (COMPILER.test(name)) compiler += v;
    else if (GC.test(name)) gc += v;
    else if (BARRIER.test(name)) barrier += v;
  }
  return { gc, compiler, barrier };
}

/** The functions with the most instructions per request; JIT code named from the perf map (the last entry covering an address wins). */
function printFunctions(rows, mapFile) {
  const entries = readFileSync(mapFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l, i) => {
      const [s, size, ...name] = l.split(' ');
      return { start: parseInt(s, 16), end: parseInt(s, 16) + parseInt(size, 16), i, name: name.join(' ') };
    })
    .sort((x, y) => x.start - y.start);
  const resolveJit = (addr) => {
    let lo = 0;
    let hi = entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (entries[mid].start <= addr) lo = mid + 1;
      else hi = mid;
    }
    let best = null;
    for (let k = lo - 1; k >= 0 && k >= lo - 200; k--) {
      const e = entries[k];
      if (e.start <= addr && addr < e.end && (best === null || e.i > best.i)) best = e;
    }
    return best === null ? 'JIT code (unnamed)' : `JS ${best.name}`;
  };
  const byName = new Map();
  for (const [raw, v] of rows) {
    const jit = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(raw);
    const name = jit === null ? raw : resolveJit(parseInt(jit[1], 16));
    byName.set(name, (byName.get(name) ?? 0) + v);
  }
  for (const [name, v] of [...byName].sort((x, y) => y[1] - x[1]).slice(0, functions)) {
    console.log(`${String(Math.round(v / n)).padStart(9)}  ${name.slice(0, 150)}`);
  }
}

const upstream = await startUpstream();
const home = mkdtempSync(join(tmpdir(), 'obcg-'));
const usageLog = a['usage-log'] === true ? join(home, 'usage.jsonl') : null;
const cgFile = join(out, `${label}.out`);
for (const f of readdirSync(out)) if (f.startsWith(`${label}.out`)) rmSync(join(out, f));
// Start-up under valgrind takes minutes when other jobs share the machine.
const serve = await startServe({
  home,
  bin: join(dir, 'dist/bin/ob-proxy.js'),
  launcher: [
    'valgrind',
    '--tool=callgrind',
    '--smc-check=all-non-file',
    '--instr-atstart=no',
    `--callgrind-out-file=${cgFile}`,
  ],
  nodeArgs: ['--single-threaded', '--max-semi-space-size=4', ...(functions > 0 ? ['--perf-basic-prof'] : [])],
  args: [
    '--log-level',
    'warn',
    ...(metricsPort === null ? [] : ['--metrics-port', String(metricsPort)]),
    ...(usageLog === null ? [] : ['--usage-log', usageLog]),
  ],
  env: extraEnv,
  logs: 'ignore',
  timeoutMs: 900_000,
});
const proc = serve.proc;
let result;
try {
  await cli(home, [
    'instances',
    'add',
    'bench',
    '--model',
    'gemma4:26b',
    '--endpoint',
    upstream.url,
    ...(a.pack === true ? ['--pack-ends', '+30d'] : []),
  ]);
  const ready = await cli(home, ['instances', 'ready', 'bench']);
  const url = serve.baseUrl;
  const secret = ops
    ? (await cli(home, ['keys', 'create', '--instance', 'bench', '--name', 'ops', ...OPS_KEY])).secret
    : ready.defaultKey.secret;
  // One agent for the warm-up and the count: connections closed and opened between the two
  // deoptimised Node's HTTP code at the window's start, and its re-optimisation landed inside the
  // window at a moment that moved from run to run.
  const agent = new Agent({ keepAlive: true, maxSockets: conc });
  await drive(agent, url, secret, body, kind, warm, conc);
  execFileSync('callgrind_control', ['-z', String(proc.pid)], { stdio: 'ignore' });
  execFileSync('callgrind_control', ['-i', 'on', String(proc.pid)], { stdio: 'ignore' });
  await drive(agent, url, secret, body, kind, n, conc);
  execFileSync('callgrind_control', ['-d', String(proc.pid)], { stdio: 'ignore' });
  agent.destroy();
  const counted = countsOf(label);
  result = {
    label,
    dir,
    // Counts differ between Node versions: a comparison holds only within one.
    node: process.version,
    kind,
    ops,
    pack: a.pack === true,
    usageLog: usageLog !== null,
    requests: n,
    concurrency: conc,
    env: extraEnv,
    ...counted.json,
  };
  // valgrind runs node in its own process, so V8's map is named by valgrind's pid.
  if (functions > 0) printFunctions(counted.rows, `/tmp/perf-${proc.pid}.map`);
} finally {
  await stopProcess(proc);
}
// Written at shutdown at the latest: a line for every request sent, warm-up included.
if (result !== undefined && usageLog !== null) {
  const lines = readFileSync(usageLog, 'utf8').split('\n').length - 1;
  if (lines !== warm + n) throw new Error(`the usage log has ${lines} lines for ${warm + n} requests`);
  result.usageLogLines = lines;
}
try {
  if (result !== undefined && a['no-reference'] !== true && !ops) {
    const ref = await countReference();
    result.referencePerRequest = ref.perRequest;
    result.referenceMutatorPerRequest = ref.mutatorPerRequest;
    result.ratio = Math.round((result.mutatorPerRequest / ref.mutatorPerRequest) * 1000) / 1000;
  }
  if (result !== undefined) console.log(JSON.stringify(result));
} finally {
  await upstream.stop();
  rmSync(home, { recursive: true, force: true });
}

async function stopProcess(p) {
  p.kill('SIGTERM');
  await new Promise((r) => {
    if (p.exitCode !== null) r();
    else p.once('exit', r);
  });
}

/** The counts of the newest dump named `name`: per request, and the split of callgrind.mjs's header. */
function countsOf(name) {
  const dump = readdirSync(out)
    .filter((f) => f.startsWith(`${name}.out.`))
    .sort()
    .pop();
  const ir = summary(join(out, dump));
  const rows = selfCosts(join(out, dump));
  const { gc, compiler, barrier } = shares(rows);
  const per = (x) => Math.round(x / n);
  return {
    rows,
    json: {
      instructions: ir,
      perRequest: per(ir),
      gcPerRequest: per(gc),
      compilerPerRequest: per(compiler),
      barrierPerRequest: per(barrier),
      mutatorPerRequest: per(ir - gc - compiler - barrier),
      dump: join(out, dump),
    },
  };
}

/**
 * The reference proxy counted as ob-proxy was: under callgrind with the same Node flags, the same
 * upstream, body, warm-up and count, on one agent.
 */
async function countReference() {
  const name = `${label}-reference`;
  for (const f of readdirSync(out)) if (f.startsWith(`${name}.out`)) rmSync(join(out, f));
  const ref = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      '--instr-atstart=no',
      `--callgrind-out-file=${join(out, `${name}.out`)}`,
      NODE,
      '--single-threaded',
      '--max-semi-space-size=4',
      join(ROOT, 'bench/reference-proxy.mjs'),
      '--upstream',
      upstream.url,
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  try {
    const url = await new Promise((done, fail) => {
      let text = '';
      ref.stdout.setEncoding('utf8');
      ref.stdout.on('data', (s) => {
        text += s;
        const line = text.split('\n').find((l) => l.startsWith('{'));
        if (line !== undefined) done(JSON.parse(line).url);
      });
      ref.once('exit', (code) => fail(new Error(`the reference proxy exited (${code}) before it served`)));
    });
    const agent = new Agent({ keepAlive: true, maxSockets: conc });
    await drive(agent, url, 'none', body, kind, warm, conc);
    execFileSync('callgrind_control', ['-z', String(ref.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['-i', 'on', String(ref.pid)], { stdio: 'ignore' });
    await drive(agent, url, 'none', body, kind, n, conc);
    execFileSync('callgrind_control', ['-d', String(ref.pid)], { stdio: 'ignore' });
    agent.destroy();
    return countsOf(name).json;
  } finally {
    await stopProcess(ref);
  }
}
