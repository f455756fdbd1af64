import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startServe as launchServe } from '../../bench/serve.mjs';

/** The built CLI: tests drive the same file users run. `npm run test:e2e` builds before vitest runs. */
export const BIN = resolve(import.meta.dirname, '../../dist/bin/ob-proxy.js');
export const NODE = process.execPath;

/** A private home with a short path (Unix socket paths are limited to ~107 bytes). */
export function tmpHome(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'obt-'));
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `ob-proxy <args>` as a real process. */
export function runCli(args: string[], opts: { home?: string; env?: Record<string, string> } = {}): Promise<CliResult> {
  const full = opts.home === undefined ? args : [...args, '--home', opts.home];
  return new Promise((done) => {
    execFile(
      NODE,
      [BIN, ...full],
      { env: { ...process.env, NO_COLOR: '1', ...opts.env }, timeout: 20_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        done({ code, stdout, stderr });
      },
    );
  });
}

/** Runs a CLI command that must succeed with --json, and returns the parsed document. */
export async function cliJson<T = unknown>(args: string[], home: string, env?: Record<string, string>): Promise<T> {
  const r = await runCli([...args, '--json'], { home, ...(env === undefined ? {} : { env }) });
  if (r.code !== 0) throw new Error(`ob-proxy ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

export interface RunningProcess {
  proc: ChildProcess;
  /** Every stdout line so far (JSON log lines for serve). */
  lines: string[];
  stderr: string[];
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  /** Calls `w` after each read of stdout and at exit; returns what stops it. */
  watch(w: () => void): () => void;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

function spawnLogged(args: string[], env: Record<string, string> = {}): RunningProcess {
  const proc = spawn(NODE, [BIN, ...args], {
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const stderr: string[] = [];
  const watchers = new Set<() => void>();
  const changed = (): void => {
    for (const w of watchers) w();
  };
  let buf = '';
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => {
    buf += s;
    let at: number;
    while ((at = buf.indexOf('\n')) !== -1) {
      lines.push(buf.slice(0, at));
      buf = buf.slice(at + 1);
    }
    changed();
  });
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => stderr.push(s));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  proc.once('exit', changed);
  return {
    proc,
    lines,
    stderr,
    exited,
    watch(w) {
      watchers.add(w);
      return () => watchers.delete(w);
    },
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** Resolves with the first line that matches, as soon as it is read (a start-up is not polled). */
function waitForLine(
  p: RunningProcess,
  match: (line: string) => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let checked = 0;
    const check = (): void => {
      for (; checked < p.lines.length; checked++) {
        const line = p.lines[checked]!;
        if (match(line)) return done(() => resolve(line));
      }
      if (p.proc.exitCode !== null || p.proc.signalCode !== null)
        done(() =>
          reject(
            new Error(
              `${what} exited ${p.proc.exitCode ?? p.proc.signalCode}: ${p.stderr.join('')}${p.lines.join('\n')}`,
            ),
          ),
        );
    };
    const timer = setTimeout(
      () => done(() => reject(new Error(`${what} did not start: ${p.stderr.join('')}${p.lines.join('\n')}`))),
      timeoutMs,
    );
    const unwatch = p.watch(check);
    const done = (settle: () => void): void => {
      clearTimeout(timer);
      unwatch();
      settle();
    };
    check();
  });
}

export interface ServeProcess extends RunningProcess {
  baseUrl: string;
  home: string;
  /** Parsed JSON log objects written so far. */
  logs(): Record<string, unknown>[];
}

/** `ob-proxy serve --port 0` on a home; resolves once both listeners are up (bench/serve.mjs, the bench's launcher too). */
export async function startServe(
  home: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<ServeProcess> {
  // A start waits on patience, not on speed: with every core busy a daemon took over 15 s to listen.
  const p = await launchServe({ bin: BIN, home, args, env, timeoutMs: 60_000 });
  return {
    ...p,
    logs: () =>
      p.lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      }),
  };
}

export interface SimProcess extends RunningProcess {
  url: string;
  /** Requests the simulated instance received (its /_sim/requests control route). */
  requests(): Promise<SimRequest[]>;
}

export interface SimRequest {
  seq: number;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  aborted: boolean;
  completed: boolean;
  chunksSent: number;
}

/** `ob-proxy simulate` as a real process. */
export async function startSimulate(models: string[], args: string[] = []): Promise<SimProcess> {
  const p = spawnLogged(['simulate', '--port', '0', '--model', ...models, ...args]);
  const line = await waitForLine(p, (l) => l.includes('simulator listening'), 'ob-proxy simulate');
  const url = (JSON.parse(line) as { url: string }).url;
  return {
    ...p,
    url,
    async requests() {
      const r = await fetch(`${url}/_sim/requests`);
      return (await r.json()) as SimRequest[];
    },
  };
}

/**
 * Polls until `fn` returns a value that is not undefined/false; no fixed sleeps. The deadline
 * only bounds a test that would otherwise hang: a machine whose cores are all busy can take
 * several seconds to reach a state a quiet one reaches at once.
 */
export async function eventually<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last === undefined ? '' : `: ${String(last)}`}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
