/* global process, console, setTimeout, fetch, performance, URL */
/**
 * A daemon on a large store (bench/big-store.mjs: 10 keys an instance, a fifth revoked), per size:
 * its start (to the socket and port answering), its RSS once started, a page of `keys list` and
 * the whole list as JSON lines (GET /v1/keys?format=lines), and the latency a chat request adds
 * while that whole list is being sent, against the same request on the idle daemon. With
 * `--probes N`: an idle daemon with N ready instances probing at the defaults, its CPU a second
 * and a chat request's latency while the rounds run, then the same daemon without probes
 * (`--refused`: every probe's port closed; `--probing-only`: not the daemon without probes). The
 * longest holds of the loop, as for the calls below, during the idle seconds and the chats.
 *
 *   node bench/scale.mjs [--keys 1000,10000,100000] [--postgres postgres://127.0.0.1:5432/test]
 *                        [--probes 100000 [--refused] [--probing-only]] [--cache DIR] [--calls all|page,all,...]
 *                        [--only json|postgres] [--node-args "--trace-gc"] [--daemon-out FILE]
 *
 * --postgres: each size is also copied with `ob-proxy store migrate` into a database made for it
 * on that server (dropped after) and measured there. Needs `npm run build`. One size at a time:
 * a million keys takes a few GB (the generator's copy, and the daemon's).
 *
 * --cache DIR: the store of each size is made once and kept there (`db-<keys>.json`, and with
 * --postgres a template database `ob_scale_<keys>_tpl`), each run starting on a copy of it.
 * --calls: the management calls (CALLS below) each sent, in turn, while chat requests go one
 * after another: the slowest and median chat during each. The daemon's CPU (user + system) for
 * its start, and with --postgres the server's processes' CPU meanwhile, are given beside the wall
 * time, with the machine's load average. Beside each call's chats, `hold`: the longest the
 * daemon's event loop was held meanwhile, as wall time and as its main thread's CPU time
 * (bench/loop-holds.mjs, loaded into the daemon). `metrics` among the calls is a scrape of the
 * daemon's --metrics-port.
 *
 * --daemon-out FILE: the daemon's stdout (what `--node-args --trace-gc` prints) appended to FILE,
 * with a line `### <call> start` and `### <call> end` around each call, to tell a collection's
 * pause from a long piece of work.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { bigStoreData } from './big-store.mjs';
import { OB_BIN, freePort, startServe } from './serve.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const at = argv.indexOf(name);
  return at === -1 ? fallback : argv[at + 1];
};
const SIZES = arg('--keys', '1000,10000,100000').split(',').map(Number);
const PG = arg('--postgres', null);
const PROBES = Number(arg('--probes', '0'));
const REFUSED = argv.includes('--refused');
const CACHE = arg('--cache', null);
const ONLY = arg('--only', null);
const NODE_ARGS = ['--max-semi-space-size=8', ...(arg('--node-args', '') || '').split(' ').filter(Boolean)];
/** Management calls (GET on the socket), by the name --calls takes. */
const CALLS = {
  page: '/v1/keys?limit=1000',
  all: '/v1/keys?format=lines',
  'all-json': '/v1/keys',
  revocations: '/v1/revocations?format=lines',
  usage: '/v1/usage',
  status: '/v1/status',
  stats: '/v1/stats',
  instances: '/v1/instances',
  audit: '/v1/audit?limit=10000',
  daemons: '/v1/daemons',
  metrics: null,
};
const CALLED = (() => {
  const v = arg('--calls', 'all');
  return v === 'every' ? Object.keys(CALLS) : v.split(',');
})();
const CHATS = 30;
const DAEMON_OUT = arg('--daemon-out', null);
/**
 * --pin-daemon CPU: the daemon on that CPU alone (taskset); run the bench itself on the others
 * (`taskset -c 1 node bench/scale.mjs --pin-daemon 0`), so that the chats' latency is the
 * daemon's, not the wait for a core the bench, the CLI and the simulators share with it.
 */
const PIN = arg('--pin-daemon', null);
const LAUNCHER = PIN === null ? [] : ['taskset', '-c', PIN];
const outFd = DAEMON_OUT === null ? null : openSync(DAEMON_OUT, 'a');
/** A line in the daemon's output file between its own: where a call starts or ends. */
const mark = (text) => {
  if (outFd !== null) writeSync(outFd, `### ${text}\n`);
};

/** db.json written a piece at a time: a million keys is past what one string holds. */
function writeStore(path, data) {
  const fd = openSync(path, 'w');
  const list = (name, records, last) => {
    writeSync(fd, `"${name}":[`);
    for (let i = 0; i < records.length; i += 1000)
      writeSync(
        fd,
        (i === 0 ? '' : ',') +
          records
            .slice(i, i + 1000)
            .map((r) => JSON.stringify(r))
            .join(',\n'),
      );
    writeSync(fd, last ? ']' : '],\n');
  };
  writeSync(fd, '{"version":2,"through":0,"auditArchived":null,\n');
  list('instances', data.instances);
  list('keys', data.keys);
  list('events', data.events, true);
  writeSync(fd, '}\n');
  closeSync(fd);
}

function rssMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]) / 1024;
}

/** CPU ms (user + system) the process has used. */
function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

/** CPU ms of every process of the PostgreSQL server (its backends included). */
function pgCpuMs() {
  let sum = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      sum += cpuMs(Number(d));
    } catch {
      // Gone meanwhile.
    }
  }
  return sum;
}

/**
 * A GET (on the daemon's socket, or a URL), its body read and dropped, in a process of its own:
 * read here, an answer of 230 MB would hold this process's loop, which times the chats.
 * Resolves with the bytes read.
 */
function getApart(target) {
  const script = `
    const http = require('node:http');
    const t = JSON.parse(process.argv[1]);
    const req = http.request(t.url ?? { socketPath: t.socketPath, path: t.path }, (res) => {
      let bytes = 0;
      res.on('data', (b) => (bytes += b.length));
      res.on('end', () => { process.stdout.write(String(bytes)); process.exitCode = res.statusCode === 200 ? 0 : 1; });
    });
    req.end();`;
  const proc = spawn(process.execPath, ['-e', script, JSON.stringify(target)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (s) => (out += s));
  return new Promise((done, fail) =>
    proc.once('close', (code) =>
      code === 0 ? done(Number(out)) : fail(new Error(`GET ${JSON.stringify(target)} failed (${code})`)),
    ),
  );
}

function upstream(host = '127.0.0.1') {
  const proc = spawn(process.execPath, [join(ROOT, 'bench/upstream.mjs'), '--host', host], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((done, fail) => {
    let out = '';
    proc.stdout.setEncoding('utf8').on('data', (s) => {
      out += s;
      const line = out.split('\n').find((l) => l.includes('"url"'));
      if (line !== undefined) done({ proc, url: JSON.parse(line).url });
    });
    proc.once('exit', (code) => fail(new Error(`upstream exited ${code}`)));
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function chat(baseUrl, secret) {
  const t = performance.now();
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gemma4:26b', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`chat answered ${res.status}`);
  return performance.now() - t;
}

/** Chat requests one after another while `work` runs: the slowest of them. */
async function slowestDuring(baseUrl, secret, work) {
  let done = false;
  const during = [];
  const running = work().finally(() => {
    done = true;
  });
  while (!done) during.push(await chat(baseUrl, secret));
  await running;
  return { slowest: Math.max(...during), median: median(during), n: during.length };
}

/**
 * The daemon's longest hold of its event loop since the last call (bench/loop-holds.mjs): it is
 * asked by SIGUSR2 and answers with a line in `file`. `{ cpuMs, wallMs }`.
 */
async function hold(proc, file) {
  const before = existsSync(file) ? readFileSync(file, 'utf8').length : 0;
  proc.kill('SIGUSR2');
  for (let i = 0; i < 1000; i++) {
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const answer = text
      .slice(before)
      .split('\n')
      .find((l) => l.startsWith('{"cpuMs"'));
    if (answer !== undefined) return JSON.parse(answer);
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the daemon never answered SIGUSR2 (is bench/loop-holds.mjs loaded?)');
}

/**
 * The daemon of a measurement, with bench/loop-holds.mjs loaded (`hold` asks it), pinned with
 * --pin-daemon, its output in --daemon-out. Its `holdsFile` is where the holds are written.
 */
async function serveWithHolds(home, args) {
  const holdsFile = arg('--holds-file', null) ?? join(home, 'holds.jsonl');
  const serve = await startServe({
    home,
    args,
    env: { OB_BENCH_HOLDS: holdsFile, OB_BENCH_HOLDS_OVER: arg('--holds-over', '') },
    nodeArgs: [...NODE_ARGS, '--import', join(ROOT, 'bench/loop-holds.mjs')],
    launcher: LAUNCHER,
    logs: outFd ?? 'ignore',
    timeoutMs: 600_000,
  });
  return Object.assign(serve, { holdsFile });
}

/** `ob-proxy keys list --all`, its lines counted. */
function listAll(home, counted) {
  const proc = spawn(process.execPath, [OB_BIN, 'keys', 'list', '--all', '--home', home], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  proc.stdout.on('data', (b) => {
    let n = 0;
    for (let i = b.indexOf(10); i !== -1; i = b.indexOf(10, i + 1)) n++;
    counted(n);
  });
  return new Promise((done, fail) =>
    proc.once('close', (code) => (code === 0 ? done() : fail(new Error(`keys list --all exited ${code}`)))),
  );
}

/** The store of `keys` keys written at `path`: from the cache when it holds one (made there once). */
function storeFile(keys, path) {
  if (CACHE === null) return writeStore(path, bigStoreData({ instances: Math.max(1, keys / 10), keys, events: 0 }));
  mkdirSync(CACHE, { recursive: true });
  const cached = join(CACHE, `db-${keys}.json`);
  if (!existsSync(cached)) {
    writeStore(`${cached}.tmp`, bigStoreData({ instances: Math.max(1, keys / 10), keys, events: 0 }));
    renameSync(`${cached}.tmp`, cached);
  }
  copyFileSync(cached, path);
}

function pgHas(name) {
  const r = spawnSync('psql', [PG, '-tAc', `SELECT 1 FROM pg_database WHERE datname = '${name}'`], {
    encoding: 'utf8',
  });
  return r.stdout.trim() === '1';
}

function pgDatabase(name, drop) {
  const sql = drop ? `DROP DATABASE IF EXISTS ${name} WITH (FORCE)` : `CREATE DATABASE ${name}`;
  const url = new URL(PG);
  const r = spawnSync('psql', [PG, '-v', 'ON_ERROR_STOP=1', '-c', sql], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`);
  url.pathname = `/${name.split(' ')[0]}`;
  return url.toString();
}

async function measure(keys, store) {
  const { DaemonClient } = await import(join(ROOT, 'dist/cli/daemon-client.js'));
  const home = mkdtempSync(join(tmpdir(), 'obscale-'));
  const up = await upstream();
  let dbName = null;
  let serve = null;
  try {
    storeFile(keys, join(home, 'db.json'));
    const metricsPort = await freePort();
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    const args = ['--log-level', 'warn', '--probe-interval', '0', '--metrics-port', String(metricsPort)];
    let migrateMs = null;
    if (store === 'postgres') {
      dbName = `ob_scale_${keys}`;
      pgDatabase(dbName, true);
      const template = CACHE === null ? null : `${dbName}_tpl`;
      const ready = template !== null && pgHas(template);
      const url = pgDatabase(ready ? `${dbName} TEMPLATE ${template}` : dbName, false);
      if (!ready) {
        const t = performance.now();
        const m = spawnSync(
          process.execPath,
          [OB_BIN, 'store', 'migrate', '--from', join(home, 'db.json'), '--to', url],
          {
            encoding: 'utf8',
          },
        );
        if (m.status !== 0) throw new Error(`store migrate: ${m.stderr}`);
        migrateMs = performance.now() - t;
        if (template !== null) pgDatabase(`${template} TEMPLATE ${dbName}`, false);
      }
      rmSync(join(home, 'db.json'));
      args.push('--store', url.replace(/ TEMPLATE .*/, ''));
    }
    const load = loadavg();
    const pg0 = store === 'postgres' ? pgCpuMs() : 0;
    const t0 = performance.now();
    mark(`${store} ${keys} start`);
    serve = await serveWithHolds(home, args);
    const held = () => hold(serve.proc, serve.holdsFile);
    const startMs = performance.now() - t0;
    // Its CPU to start: on a shared machine the wall time is the neighbours' as much as its own.
    const startCpuMs = cpuMs(serve.proc.pid);
    const pgStartCpuMs = store === 'postgres' ? pgCpuMs() - pg0 : null;
    const rss = rssMiB(serve.proc.pid);
    const client = new DaemonClient(join(home, 'ob-proxy.sock'));
    client.timeoutMs = 600_000;
    await client.addInstance({ id: 'timed', model: 'gemma4:26b', endpoint: `${up.url}/v1` });
    await client.ready('timed', { wait: true, probe: false });
    const { secret } = await client.createKey('timed', 'bench');
    for (let i = 0; i < 10; i++) await chat(serve.baseUrl, secret);
    await held();
    const idle = [];
    for (let i = 0; i < CHATS; i++) idle.push(await chat(serve.baseUrl, secret));
    const idleHold = await held();
    let t = performance.now();
    await client.keyPage({ limit: 1000 });
    const pageMs = performance.now() - t;
    // The whole list by the CLI, in a process of its own (as an operator runs it), while chat
    // requests go one after another.
    let lines = 0;
    await held();
    mark('keys list --all start');
    t = performance.now();
    const during = await slowestDuring(serve.baseUrl, secret, () => listAll(home, (n) => (lines += n)));
    const wholeMs = performance.now() - t;
    const listHold = await held();
    mark('keys list --all end');
    // Each management call on the socket, alone, with chat requests one after another meanwhile.
    const calls = {};
    for (const name of CALLED) {
      if (name === 'all') continue;
      await held();
      mark(`${name} start`);
      const c0 = cpuMs(serve.proc.pid);
      const tc = performance.now();
      let bytes = 0;
      const d = await slowestDuring(serve.baseUrl, secret, async () => {
        bytes = await getApart(
          CALLS[name] === null ? { url: metricsUrl } : { socketPath: join(home, 'ob-proxy.sock'), path: CALLS[name] },
        );
      });
      calls[name] = {
        ms: Math.round(performance.now() - tc),
        cpuMs: cpuMs(serve.proc.pid) - c0,
        hold: await held(),
        bytes,
        chatMedianMs: +d.median.toFixed(1),
        chatMaxMs: +d.slowest.toFixed(1),
        chats: d.n,
      };
      mark(`${name} end`);
    }
    const result = {
      store,
      keys,
      load1: +load[0].toFixed(1),
      migrateMs,
      startMs,
      startCpuMs,
      pgStartCpuMs,
      rssMiB: rss,
      rssAfterMiB: rssMiB(serve.proc.pid),
      pageMs,
      wholeMs,
      listed: lines,
      chatIdleMs: median(idle),
      chatIdleMaxMs: Math.max(...idle),
      chatDuringListMs: during.median,
      chatDuringListMaxMs: during.slowest,
      chatsDuringList: during.n,
      idleHold,
      listHold,
      calls,
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await serve?.stop();
    up.proc.kill();
    rmSync(home, { recursive: true, force: true });
    if (dbName !== null) pgDatabase(dbName, true);
  }
}

/** `n` chat requests' latencies, one after another, for `ms` milliseconds: p50, p90 and max. */
async function chatsFor(baseUrl, secret, ms) {
  const xs = [];
  const until = performance.now() + ms;
  while (performance.now() < until) xs.push(await chat(baseUrl, secret));
  xs.sort((a, b) => a - b);
  return { n: xs.length, p50: xs[Math.floor(xs.length / 2)], p90: xs[Math.floor(xs.length * 0.9)], max: xs.at(-1) };
}

/**
 * An idle daemon with `instances` ready instances, at the default log level and probe settings
 * (`probing` false: --probe-interval 0, the same daemon without probes). Each instance's endpoint
 * is an address of its own (127.1.x.y) on one simulator process listening on every loopback
 * address, so each probe opens a connection as it does against real model servers (`refused`: a
 * closed port instead, every probe failing); the chat requests go to another simulator, so the
 * probes' server never delays them. Its CPU a second (and the probes' simulator's), then chat
 * requests one after another for 5 s while the round runs.
 */
async function measureProbes(instances, probing) {
  const { DaemonClient } = await import(join(ROOT, 'dist/cli/daemon-client.js'));
  const home = mkdtempSync(join(tmpdir(), 'obscale-'));
  const up = await upstream();
  const targets = REFUSED ? null : await upstream('0.0.0.0');
  let serve = null;
  try {
    const data = bigStoreData({ instances, keys: instances, events: 0 });
    const port = targets === null ? 9 : new URL(targets.url).port;
    data.instances.forEach((inst, i) => {
      inst.endpoint = `http://127.1.${(i >> 8) & 255}.${i & 255}:${port}`;
    });
    writeStore(join(home, 'db.json'), data);
    serve = await serveWithHolds(home, probing ? [] : ['--probe-interval', '0']);
    const held = () => hold(serve.proc, serve.holdsFile);
    const client = new DaemonClient(join(home, 'ob-proxy.sock'));
    await client.addInstance({ id: 'timed', model: 'gemma4:26b', endpoint: `${up.url}/v1` });
    await client.ready('timed', { wait: true, probe: false });
    const { secret } = await client.createKey('timed', 'bench');
    for (let i = 0; i < 10; i++) await chat(serve.baseUrl, secret);
    // Idle but for the probes: their CPU alone, then chat requests among them.
    const seconds = 20;
    // The start's own work in the background (the store's first fold) ends first.
    await new Promise((r) => setTimeout(r, 10_000));
    await held();
    const c0 = cpuMs(serve.proc.pid);
    const t0 = targets === null ? 0 : cpuMs(targets.proc.pid);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpuPerSecond = (cpuMs(serve.proc.pid) - c0) / seconds;
    const targetsCpuPerSecond = targets === null ? null : (cpuMs(targets.proc.pid) - t0) / seconds;
    const idleHold = await held();
    const during = await chatsFor(serve.baseUrl, secret, 5000);
    const chatsHold = await held();
    const result = {
      instances,
      probing,
      targets: targets === null ? 'refused' : 'answering',
      cpuMsPerSecond: cpuPerSecond,
      targetsCpuMsPerSecond: targetsCpuPerSecond,
      chatMs: during,
      idleHold,
      chatsHold,
      rssMiB: rssMiB(serve.proc.pid),
      load: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    };
    console.log(JSON.stringify(result));
    return result;
  } finally {
    await serve?.stop();
    up.proc.kill();
    targets?.proc.kill();
    rmSync(home, { recursive: true, force: true });
  }
}

if (PROBES > 0) {
  if (!argv.includes('--unprobed-only')) await measureProbes(PROBES, true);
  if (!argv.includes('--probing-only')) await measureProbes(PROBES, false);
} else
  for (const keys of SIZES) {
    if (ONLY !== 'postgres') await measure(keys, 'json');
    if (PG !== null && ONLY !== 'json') await measure(keys, 'postgres');
  }
