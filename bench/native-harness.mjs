/* global process, setTimeout, URL */
/**
 * What bench/native-counters.mjs builds on: `ob-proxy serve` from a checkout's dist/ (this one's
 * or an older build's: the CLI calls are the same in both), started natively on a fresh home with
 * an instance on the bench's upstream made ready, and a client that sends a fixed number of
 * requests and checks every answer whole (`drive`, which bench/callgrind.mjs uses too).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchDatabase } from './postgres.mjs';
import { freePort, startUpstream } from './targets.mjs';

const NODE = process.execPath;
export const wait = (ms) => new Promise((r) => setTimeout(r, ms));

function cli(dir, home, args) {
  return new Promise((done, fail) => {
    execFile(
      NODE,
      [join(dir, 'dist/bin/ob-proxy.js'), ...args, '--home', home, '--json'],
      { timeout: 120_000, env: { ...process.env, NO_COLOR: '1' } },
      (err, stdout, stderr) => {
        if (err !== null) fail(new Error(`ob-proxy ${args.join(' ')}: ${stderr}`));
        else done(JSON.parse(stdout));
      },
    );
  });
}

/**
 * The upstream and a daemon of `dir` with `nodeArgs` and `env`; `onStdout`/`onStderr` get the
 * daemon's output as text. `serveArgs`: more arguments for `serve` (`--store`, `--metrics-port`);
 * `keyArgs`: the secret is then a key made with `keys create` and these (limits), not the default
 * key. `upstream`: an upstream of the caller's ({ url, stop() }) in place of bench/upstream.mjs;
 * `cwd`: the daemon's working directory. Resolves to { proc, home, url, secret, stop() }.
 */
export async function startDaemon(
  dir,
  {
    nodeArgs = [],
    env = {},
    serveArgs = [],
    keyArgs = null,
    upstream: given = null,
    cwd = undefined,
    onStdout = () => {},
    onStderr = () => {},
  } = {},
) {
  const upstream = given ?? (await startUpstream());
  const home = mkdtempSync(join(tmpdir(), 'obnc-'));
  const port = await freePort();
  const proc = spawn(
    NODE,
    [
      ...nodeArgs,
      join(dir, 'dist/bin/ob-proxy.js'),
      'serve',
      '--home',
      home,
      '--port',
      String(port),
      '--log-level',
      'warn',
      ...serveArgs,
    ],
    { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', ...env } },
  );
  let stderr = '';
  proc.stdout.setEncoding('utf8').on('data', onStdout);
  proc.stderr.setEncoding('utf8').on('data', (s) => {
    stderr += s;
    onStderr(s);
  });
  const stop = async () => {
    proc.kill('SIGTERM');
    await new Promise((r) => {
      if (proc.exitCode !== null || proc.signalCode !== null) r();
      else proc.once('exit', r);
    });
    await upstream.stop();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + 120_000;
    for (;;) {
      try {
        await cli(dir, home, ['instances', 'list']);
        break;
      } catch (err) {
        if (Date.now() > deadline || proc.exitCode !== null)
          throw new Error(`daemon did not start: ${stderr.slice(-2000)}`, { cause: err });
        await wait(300);
      }
    }
    await cli(dir, home, ['instances', 'add', 'bench', '--model', 'gemma4:26b', '--endpoint', upstream.url]);
    const ready = await cli(dir, home, ['instances', 'ready', 'bench']);
    const secret =
      keyArgs === null
        ? ready.defaultKey.secret
        : (await cli(dir, home, ['keys', 'create', '--instance', 'bench', '--name', 'bench-variant', ...keyArgs]))
            .secret;
    return { proc, home, url: `http://127.0.0.1:${port}`, secret, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** `count` requests of `body`, `conc` at a time over keep-alive sockets; every answer read whole and checked. */
export async function drive(url, secret, body, kind, count, conc) {
  const agent = new Agent({ keepAlive: true, maxSockets: conc });
  const headers = {
    authorization: `Bearer ${secret}`,
    'content-type': 'application/json',
    'content-length': String(body.length),
  };
  let next = 0;
  let bad = 0;
  const one = () =>
    new Promise((done) => {
      const req = request(new URL('/v1/chat/completions', url), { method: 'POST', agent, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (s) => {
          text += s;
        });
        res.on('end', () => {
          if (res.statusCode !== 200 || (kind === 'stream' && !text.trimEnd().endsWith('data: [DONE]'))) bad++;
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
  agent.destroy();
  if (bad > 0) throw new Error(`${bad} of ${count} requests failed`);
}

/** The bench key's limits for `+ops`: far above any load here, so every request is checked and counted, none refused. */
export const OPS_KEY = ['--rpm', '1000000000', '--tpm', '1000000000', '--concurrency', '1000000'];
/** `+conc`: the concurrency limit alone, which sends no x-ratelimit-* header; `+rpm`: rpm alone (three headers). */
const PART_KEYS = { conc: ['--concurrency', '1000000'], rpm: ['--rpm', '1000000000'] };

/**
 * `startDaemon` for `DIR`, `DIR+pg` (the PostgreSQL store, in a database of its own on
 * `pgServer`, dropped at `stop`) or `DIR+ops` (metrics on, and a key with limits), or both;
 * `+metrics` and `+limits` are the two halves of `+ops`; `+conc` and `+rpm` are parts of `+limits`
 * (a key with that limit alone), to tell the x-ratelimit-* headers' cost from the counting's.
 */
export async function startVariant(spec, { pgServer, ...opts } = {}) {
  const [path, ...variants] = spec.split('+');
  const serveArgs = [];
  const db = variants.includes('pg') ? await benchDatabase(pgServer) : null;
  if (db !== null) serveArgs.push('--store', db.url);
  const ops = variants.includes('ops');
  if (ops || variants.includes('metrics')) serveArgs.push('--metrics-port', String(await freePort()));
  const limits = ops || variants.includes('limits');
  const part = variants.find((v) => v in PART_KEYS);
  const keyArgs = limits ? OPS_KEY : part === undefined ? null : PART_KEYS[part];
  try {
    const daemon = await startDaemon(resolve(path), { ...opts, serveArgs, keyArgs });
    return {
      ...daemon,
      stop: async () => {
        await daemon.stop();
        await db?.drop();
      },
    };
  } catch (err) {
    await db?.drop();
    throw err;
  }
}
