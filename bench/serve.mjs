/* global process, setTimeout, clearTimeout */
/**
 * `ob-proxy serve` as a real process: the one launcher of the bench and of the tests that need a
 * real daemon (test/helpers/processes.ts re-exports it with its types, bench/serve.d.mts).
 *
 * With `logs: 'pipe'` (the tests) the daemon listens on port 0, its stdout is read line by line,
 * and the launcher resolves on the `ob-proxy serving` line, which names the bound URL: no port is
 * guessed and nothing is polled. With `logs: 'ignore'` (the bench: a daemon must not pay for a pipe
 * nobody reads, and at `--log-level warn` it prints no such line) it is given a free port and the
 * launcher resolves once that port accepts and the management socket exists. `logs` may also be
 * a file descriptor: the daemon's stdout goes there, unread, as with 'ignore' (the bench's
 * `--daemon-out`, for what `--trace-gc` prints).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join, resolve } from 'node:path';

/** This checkout's built CLI: the file users run. */
export const OB_BIN = resolve(import.meta.dirname, '../dist/bin/ob-proxy.js');

/** A TCP port free on 127.0.0.1 at the moment of asking. */
export function freePort() {
  return new Promise((done, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => done(port));
    });
  });
}

function accepts(port) {
  return new Promise((done) => {
    const sock = connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      done(true);
    });
    sock.once('error', () => done(false));
  });
}

function flagValue(args, flag) {
  const at = args.lastIndexOf(flag);
  return at === -1 ? undefined : args[at + 1];
}

export async function startServe({
  home,
  bin = OB_BIN,
  args = [],
  env = {},
  nodeArgs = [],
  launcher = [],
  logs = 'pipe',
  timeoutMs = 15_000,
} = {}) {
  if (typeof home !== 'string') throw new Error('startServe: a home folder is required');
  const piped = logs === 'pipe';
  const port = piped ? 0 : await freePort();
  const argv = [
    ...launcher,
    process.execPath,
    ...nodeArgs,
    bin,
    'serve',
    '--home',
    home,
    '--port',
    String(port),
    ...args,
  ];
  const proc = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', piped ? 'pipe' : typeof logs === 'number' ? logs : 'ignore', 'pipe'],
  });
  const lines = [];
  const stderr = [];
  const watchers = new Set();
  const changed = () => {
    for (const w of watchers) w();
  };
  let buf = '';
  proc.stdout?.setEncoding('utf8').on('data', (s) => {
    buf += s;
    let at;
    while ((at = buf.indexOf('\n')) !== -1) {
      lines.push(buf.slice(0, at));
      buf = buf.slice(at + 1);
    }
    changed();
  });
  proc.stderr.setEncoding('utf8').on('data', (s) => {
    stderr.push(s);
    changed();
  });
  // Once its output is read to the end too ('close', not 'exit'): what it wrote last, a shutdown's
  // error lines, is in `lines` and `stderr` when the caller looks.
  const exited = new Promise((r) => proc.once('close', (code) => r(code)));
  proc.once('exit', changed);
  const p = {
    proc,
    home,
    lines,
    stderr,
    exited,
    watch(w) {
      watchers.add(w);
      return () => watchers.delete(w);
    },
    stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
  const gone = () => proc.exitCode !== null || proc.signalCode !== null;
  const output = () => `${stderr.join('')}${lines.join('\n')}`;

  if (piped) {
    const line = await new Promise((done, fail) => {
      let checked = 0;
      const settle = (f) => {
        clearTimeout(timer);
        unwatch();
        f();
      };
      const check = () => {
        for (; checked < lines.length; checked++)
          if (lines[checked].includes('"ob-proxy serving"')) return settle(() => done(lines[checked]));
        if (gone())
          settle(() => fail(new Error(`ob-proxy serve exited ${proc.exitCode ?? proc.signalCode}: ${output()}`)));
      };
      const timer = setTimeout(
        () => settle(() => fail(new Error(`ob-proxy serve did not start: ${output()}`))),
        timeoutMs,
      );
      const unwatch = p.watch(check);
      check();
    });
    return { ...p, baseUrl: JSON.parse(line).baseUrl };
  }

  const socket = flagValue(args, '--socket') ?? join(home, 'ob-proxy.sock');
  const deadline = Date.now() + timeoutMs;
  // The port and the management socket come up one after the other (far apart under valgrind).
  while (!(existsSync(socket) && (await accepts(port)))) {
    if (gone()) throw new Error(`ob-proxy serve exited ${proc.exitCode ?? proc.signalCode}: ${output()}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`ob-proxy serve did not start within ${timeoutMs} ms: ${output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { ...p, baseUrl: `http://127.0.0.1:${port}` };
}
