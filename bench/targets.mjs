/* global process, setTimeout, clearTimeout, URL */
/**
 * The processes under test, each started for real on 127.0.0.1: the fixed-body upstream, the
 * reference proxy, ob-proxy (`serve` from dist/, an instance made ready through the CLI) and
 * nginx when installed. Each target is { name, url, headers, pids(), stop() }.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { childPids } from './procstat.mjs';
import { OB_BIN, freePort, startServe } from './serve.mjs';

export { OB_BIN, freePort };

const ROOT = resolve(import.meta.dirname, '..');
const NODE = process.execPath;

function spawnWithUrl(cmd, args, what) {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  let out = '';
  let err = '';
  proc.stderr.setEncoding('utf8').on('data', (s) => {
    err += s;
  });
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`${what} did not start: ${err}`)), 15_000);
    proc.stdout.setEncoding('utf8').on('data', (s) => {
      out += s;
      const line = out.split('\n').find((l) => l.includes('"url"'));
      if (line !== undefined && timer !== null) {
        clearTimeout(timer);
        done({ proc, url: JSON.parse(line).url });
      }
    });
    proc.once('exit', (code) => fail(new Error(`${what} exited ${code}: ${err}`)));
  });
}

function stopper(proc) {
  return () =>
    new Promise((done) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return done();
      proc.once('exit', () => done());
      proc.kill('SIGTERM');
      setTimeout(() => proc.kill('SIGKILL'), 5_000).unref();
    });
}

async function waitForPort(port, what, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((done) => {
      const sock = connect(port, '127.0.0.1');
      sock.once('connect', () => {
        sock.destroy();
        done(true);
      });
      sock.once('error', () => done(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${what} is not listening on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function startUpstream() {
  const { proc, url } = await spawnWithUrl(NODE, [join(ROOT, 'bench/upstream.mjs')], 'upstream');
  return { name: 'direct', url, headers: {}, pids: () => [proc.pid], stop: stopper(proc) };
}

export async function startReference(upstreamUrl, { nodeArgs = [] } = {}) {
  const { proc, url } = await spawnWithUrl(
    NODE,
    [...nodeArgs, join(ROOT, 'bench/reference-proxy.mjs'), '--upstream', upstreamUrl],
    'reference proxy',
  );
  return { name: 'reference', url, headers: {}, pids: () => [proc.pid], stop: stopper(proc) };
}

function cli(args, timeout = 20_000) {
  return new Promise((done, fail) => {
    execFile(
      NODE,
      [OB_BIN, ...args, '--json'],
      { env: { ...process.env, NO_COLOR: '1' }, timeout },
      (err, stdout, stderr) => {
        if (err !== null) fail(new Error(`ob-proxy ${args[0]} ${args[1]} failed: ${stderr}`));
        else done(JSON.parse(stdout));
      },
    );
  });
}

/**
 * `ob-proxy serve` on a fresh home, with an instance pointing at the upstream made ready. `ops`:
 * metrics on (a port of their own) and the bench key made with generous limits, so their cost is
 * measured; `metrics` and `limits` turn on one of the two alone.
 * `launcher`: a command the daemon runs under (valgrind), with `slow` for its longer start-up.
 */
export async function startObProxy(
  upstreamUrl,
  {
    logLevel = 'warn',
    name = 'ob-proxy',
    nodeArgs = [],
    bin = OB_BIN,
    store,
    ops = false,
    metrics = ops,
    limits = ops,
    launcher = [],
    slow = false,
  } = {},
) {
  const home = mkdtempSync(join(tmpdir(), 'obb-'));
  // Slow (valgrind): no health probes, work that comes per unit of time rather than per request.
  const args = [
    '--log-level',
    logLevel,
    ...(store === undefined ? [] : ['--store', store]),
    ...(metrics ? ['--metrics-port', String(await freePort())] : []),
    ...(slow ? ['--probe-interval', '0'] : []),
  ];
  const wait = slow ? 900_000 : 20_000;
  // Logs are not read, as under systemd or a container runtime: the bench must not pay for a pipe.
  const serve = await startServe({ home, bin, args, nodeArgs, launcher, logs: 'ignore', timeoutMs: wait });
  await cli(['instances', 'add', 'bench', '--model', 'gemma4:26b', '--endpoint', upstreamUrl, '--home', home], wait);
  // Under valgrind on a busy machine the daemon's probe of the upstream can miss its 5 s: the upstream is ours and up.
  const ready = await cli(['instances', 'ready', 'bench', '--home', home, ...(slow ? ['--no-probe'] : [])], wait);
  // Limits far above what the bench sends: every request is checked and counted, none refused.
  // `limits: 'concurrency'`: that limit alone, which sends no x-ratelimit-* header (what the headers cost, by difference).
  const only = limits === 'concurrency' ? [] : ['--rpm', '1000000000', '--tpm', '1000000000'];
  const secret = limits
    ? (
        await cli(
          [
            'keys',
            'create',
            '--instance',
            'bench',
            '--name',
            'bench-ops',
            ...only,
            '--concurrency',
            '1000000',
            '--home',
            home,
          ],
          wait,
        )
      ).secret
    : ready.defaultKey.secret;
  const stop = stopper(serve.proc);
  return {
    name,
    url: serve.baseUrl,
    home,
    headers: { Authorization: `Bearer ${secret}` },
    pids: () => [serve.proc.pid],
    stop: async () => {
      await stop();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export function hasNginx() {
  try {
    execFileSync('nginx', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** nginx as a plain reverse proxy: one worker (Node is one thread), keep-alive upstream, no buffering of responses. */
export async function startNginx(upstreamUrl) {
  const prefix = mkdtempSync(join(tmpdir(), 'obn-'));
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(prefix, d));
  const port = await freePort();
  const up = new URL(upstreamUrl);
  const conf = `
worker_processes 1;
worker_rlimit_nofile 20000;
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
${process.getuid?.() === 0 ? 'user root;' : ''}
events { worker_connections 10000; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  client_max_body_size 16m;
  client_body_buffer_size 1m;
  keepalive_requests 1000000;
  upstream model { server ${up.hostname}:${up.port}; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://model;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`;
  writeFileSync(join(prefix, 'nginx.conf'), conf);
  const proc = spawn('nginx', ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-e', join(prefix, 'error.log')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr.setEncoding('utf8').on('data', (s) => {
    err += s;
  });
  try {
    await waitForPort(port, 'nginx');
  } catch (e) {
    proc.kill('SIGKILL');
    let log = '';
    try {
      log = readFileSync(join(prefix, 'error.log'), 'utf8');
    } catch {
      /* none */
    }
    throw new Error(`${e.message}: ${err}${log}`, { cause: e });
  }
  const stop = stopper(proc);
  return {
    name: 'nginx',
    url: `http://127.0.0.1:${port}`,
    headers: {},
    pids: () => [proc.pid, ...childPids(proc.pid)],
    stop: async () => {
      await stop();
      rmSync(prefix, { recursive: true, force: true });
    },
  };
}

/**
 * A target whose process can be replaced between repetitions: `start()` makes a fresh one and
 * the object keeps its name, so runs stay grouped by target; url, headers and pids follow.
 */
export async function restartable(start) {
  let cur = await start();
  return {
    name: cur.name,
    get url() {
      return cur.url;
    },
    get headers() {
      return cur.headers;
    },
    get home() {
      return cur.home;
    },
    pids: () => cur.pids(),
    stop: () => cur.stop(),
    restart: async () => {
      await cur.stop();
      cur = await start();
    },
  };
}
