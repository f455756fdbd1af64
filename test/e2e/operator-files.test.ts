/**
 * Regression: files the operator names were read with `readFile`. `--tls-cert` naming a FIFO
 * (or a path on a mount that hangs): each SIGHUP's read blocked one of libuv's four threadpool
 * threads for good and logged nothing; after four SIGHUPs the store's writes, which share the
 * pool, waited for ever and `keys create` / `keys revoke` timed out (exit 3). With the cert at
 * /dev/zero, RSS grew to 1.8 GB in 4 s: the 1 MiB cap was checked after the whole read. An
 * upstream token file that is a FIFO did the same through `instances add`, and a FIFO as the cert
 * at start hung the start for ever.
 *
 * Now such a file is opened without blocking and refused unless it is a regular file, read no
 * further than its cap, and the failure is logged (at a reload) or answered (at a start or a
 * route) naming the file and what to do; the store's writes go on.
 */
import { execFileSync } from 'node:child_process';
import { copyFile, readFile, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type ServeProcess,
  type SimProcess,
  eventually,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { readyInstance } from '../helpers/store-home.js';
import { type Pair, makePair, servedFingerprint } from '../helpers/tls-pair.js';

// A CLI that waits on a wedged daemon gives up after this, rather than the 120 s default.
const CLI = { OB_PROXY_CLI_TIMEOUT: '10' };
const FAILED = 'TLS reload failed: still serving the previous certificate';

let dir: string;
let a: Pair;
let b: Pair;
let live: { cert: string; key: string };
let sim: SimProcess;
let serve: ServeProcess;

beforeAll(async () => {
  dir = await tmpHome();
  a = makePair(dir, 'a');
  b = makePair(dir, 'b');
  live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };
  await copyFile(a.cert, live.cert);
  await copyFile(a.key, live.key);
  sim = await startSimulate(['gemma4:26b'], ['--chunks', '1']);
  serve = await startServe(await tmpHome(), ['--tls-cert', live.cert, '--tls-key', live.key]);
  await readyInstance(serve.home, 'gpu-1', sim.url);
});
afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

function failures(): string[] {
  return serve
    .logs()
    .filter((l) => l.msg === FAILED)
    .map((l) => l.err as string);
}

/** `keys create`, a store write, through the real CLI. */
async function createKey(name: string): Promise<void> {
  const r = await runCli(['keys', 'create', '--instance', 'gpu-1', '--name', name, '--json'], {
    home: serve.home,
    env: CLI,
  });
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  expect(JSON.parse(r.stdout)).toMatchObject({ name, instance: 'gpu-1', status: 'active' });
}

/** Sends SIGHUPs one at a time, each once the previous one's reload is logged as failed. */
async function sighups(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const before = failures().length;
    serve.proc.kill('SIGHUP');
    await eventually(() => failures().length > before, `reload ${i + 1} logged`);
  }
}

function vmKiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const status = execFileSync('cat', [`/proc/${pid}/status`], { encoding: 'utf8' });
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
}

it('a FIFO as --tls-cert: six SIGHUPs are each logged, the store still takes writes, the certificate stays', async () => {
  await rm(live.cert);
  execFileSync('mkfifo', [live.cert]);
  await sighups(6);
  expect(failures()).toEqual(
    Array(6).fill(
      `--tls-cert ${live.cert} is a named pipe (FIFO), not a regular file: give the path of the PEM file itself (a pipe or a device can block or never end).`,
    ),
  );
  expect(await servedFingerprint(serve.baseUrl, [a.pem])).toBe(a.fingerprint);
  await createKey('after-fifo');

  // The file put right, the next SIGHUP serves it.
  await rm(live.cert);
  await copyFile(b.cert, live.cert);
  await copyFile(b.key, live.key);
  serve.proc.kill('SIGHUP');
  await eventually(
    async () => (await servedFingerprint(serve.baseUrl, [b.pem])) === b.fingerprint,
    'the new pair served',
  );
});

it('/dev/zero as --tls-cert: refused without reading it, RSS stays small', async () => {
  const before = vmKiB(serve.proc.pid!, 'VmHWM');
  await rm(live.cert);
  await symlink('/dev/zero', live.cert);
  await sighups(3);
  expect(failures().slice(-3)).toEqual(
    Array(3).fill(
      `--tls-cert ${live.cert} is a character device, not a regular file: give the path of the PEM file itself (a pipe or a device can block or never end).`,
    ),
  );
  // The peak resident size over the daemon's life: no read of the device ever grew it.
  expect(vmKiB(serve.proc.pid!, 'VmHWM') - before).toBeLessThan(64 * 1024);
  await createKey('after-dev-zero');
  expect(await servedFingerprint(serve.baseUrl, [b.pem])).toBe(b.fingerprint);
  await rm(live.cert);
  await copyFile(b.cert, live.cert);
});

it('a FIFO as an upstream token file: each `instances add` is refused at once, the store still takes writes', async () => {
  const fifo = join(dir, 'token.fifo');
  execFileSync('mkfifo', [fifo]);
  for (let i = 0; i < 5; i++) {
    const r = await runCli(
      ['instances', 'add', `gpu-t${i}`, '--model', 'gemma4:26b', '--endpoint', sim.url, '--upstream-token-file', fifo],
      { home: serve.home, env: CLI },
    );
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: The upstream token file ${fifo} is a named pipe (FIFO), not a regular file. Give a regular file that holds the token on one line.\n`,
    });
  }
  await createKey('after-token-fifo');
});

it('a FIFO as --tls-cert at start: exit 1 naming it, nothing left behind', async () => {
  const fifo = join(dir, 'start.fifo');
  execFileSync('mkfifo', [fifo]);
  const home = await tmpHome();
  const r = await runCli(['serve', '--port', '0', '--tls-cert', fifo, '--tls-key', a.key], { home });
  expect(r).toEqual({
    code: 1,
    stdout: '',
    stderr: `error: --tls-cert ${fifo} is a named pipe (FIFO), not a regular file: give the path of the PEM file itself (a pipe or a device can block or never end).\n`,
  });
  expect(await readFile(join(home, 'db.json')).catch(() => null)).toBeNull();
});
