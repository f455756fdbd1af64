#!/usr/bin/env node
/**
 * The entry point: wires argv, environment, stdio and signals to the CLI program, and injects
 * the long-running commands (serve, simulate, demo) from daemon/ so cli/ and daemon/ stay apart.
 * Each command imports what it needs when it runs: `--help` or `instances list` never load
 * Fastify, pino, the store, the simulator, Ink or React (test/e2e/cli-imports.test.ts).
 */
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { type CommandDefaults, type Config, type ConfigFlags } from '../src/config.js';
import { resolveConfig } from '../src/config-resolve.js';
import { givenValue } from '../src/config-read.js';
import { ObProxyError } from '../src/errors.js';
import { type ProgramDeps, UsageError, runCli } from '../cli/program.js';
import type { FailMode, Flavor } from '../simulator/simulator.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
const env = process.env;

function config(flags: ConfigFlags, defaults: CommandDefaults): Config {
  try {
    return resolveConfig(flags, env, homedir(), defaults);
  } catch (err) {
    if (err instanceof ObProxyError) throw new UsageError(err.message);
    throw err;
  }
}

function num(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a non-negative number, got "${v}".`);
  return n;
}

async function ask(question: string): Promise<string> {
  const { createInterface } = await import('node:readline/promises');
  // The question on stderr: stdout stays the command's answer (one JSON document with --json).
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

/** serve, demo and simulate: their output is a log, and losing it fails nothing (see below). */
let serving = false;

const deps: ProgramDeps = {
  version: pkg.version,
  io: {
    out: (s) => void process.stdout.write(s),
    err: (s) => void process.stderr.write(s),
    isTTY: process.stdout.isTTY === true,
    // Someone to ask only when both the keyboard and the question's stream are a terminal.
    ...(process.stdin.isTTY === true && process.stderr.isTTY === true ? { ask } : {}),
    env,
  },
  connect: async (socketPath) => new (await import('../cli/daemon-client.js')).DaemonClient(socketPath),
  serve: async (o) => {
    serving = true;
    // People read a terminal, machines read pipes and journald.
    const cfg = config(o, { logFormat: process.stdout.isTTY ? 'pretty' : 'json' });
    const { resolveGroup, runServe } = await import('../daemon/run-serve.js');
    const socketGid =
      cfg.socketGroup === null
        ? undefined
        : await resolveGroup(cfg.socketGroup).catch((err: unknown) => {
            throw err instanceof ObProxyError ? new UsageError(err.message) : err;
          });
    await runServe(
      cfg,
      { version: pkg.version, ...(socketGid === undefined ? {} : { socketGid }) },
      { pidFile: o.pidFile },
    );
  },
  // Loaded only when asked for, so the other commands never load Ink and React.
  console: async (socketPath, o) => {
    const { runConsole } = await import('../cli/console/run-console.js');
    await runConsole(socketPath, { json: o.json === true });
  },
  demo: async (o) => {
    serving = true;
    const { demoHome, runDemo } = await import('../daemon/run-demo.js');
    const given = givenValue('home', o, env);
    const temporary = given === undefined;
    const home = await demoHome(given);
    try {
      const cfg = config({ ...o, home }, { logLevel: 'warn' });
      await runDemo(cfg, { version: pkg.version }, (s) => process.stdout.write(s));
    } finally {
      // A home made for this demo holds only its keys, useless once it stops (or failed to start).
      if (temporary) await rm(home, { recursive: true, force: true });
    }
  },
  simulate: async (o) => {
    serving = true;
    const { buildSimulator } = await import('../simulator/simulator.js');
    const sim = buildSimulator({
      models: o.model,
      firstTokenDelayMs: num(o.firstTokenMs, 'first-token-ms'),
      tokensPerSecond: num(o.tokensPerSecond, 'tokens-per-second'),
      chunks: num(o.chunks, 'chunks'),
      fail: o.fail as FailMode | undefined,
      failAfterChunks: num(o.failAfter, 'fail-after'),
      errorStatus: num(o.errorStatus, 'error-status'),
      reasoning: o.reasoning === true,
      ...(o.flavor === undefined ? {} : { flavor: o.flavor as Flavor }),
      responses: o.responses !== false,
      completions: o.completions !== false,
      messages: o.messages !== false,
      status: num(o.status, 'status'),
      bodyBytes: num(o.bodyBytes, 'body-bytes'),
    });
    const url = await sim.listen(num(o.port, 'port') ?? 0, o.host);
    const stopped = new Promise<void>((resolve) => {
      const stop = (): void => void sim.close().then(resolve, resolve);
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    const pidFile = o.pidFile;
    const pids = pidFile === undefined ? null : await import('../daemon/pid-file.js');
    // Once listening, so a script that waits for the file can call the simulator straight away.
    if (pidFile !== undefined)
      await pids?.writePidFile(pidFile).catch(async (err: unknown) => {
        await sim.close();
        throw err;
      });
    process.stdout.write(`${JSON.stringify({ msg: 'simulator listening', url, models: o.model })}\n`);
    await stopped;
    if (pidFile !== undefined) await pids?.removePidFile(pidFile);
  },
};

/**
 * A reader that leaves early (`ob-proxy keys list | head -1`, a log pipe whose reader is gone)
 * closes the pipe. Node ignores SIGPIPE, so the write's EPIPE was an unhandled 'error' event: a
 * stack trace and exit 1 from `serve --help | head`, and a simulator or demo that died once nobody
 * read its output. Now the writes are dropped and nothing is printed. A daemon, simulator or
 * demo keeps serving: its output is a log. A one-shot command's output was its answer (a list, a
 * key's only showing of its secret), so one that succeeded but could not write it exits 141, as
 * a Unix tool killed by SIGPIPE does, and a script with `set -o pipefail` sees it.
 */
const PIPE_CLOSED = 141;
let lost = false;
let done = false;
for (const stream of [process.stdout, process.stderr])
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    lost = true;
    // The write's error can come after the command has returned.
    if (done && !serving && process.exitCode === 0) process.exitCode = PIPE_CLOSED;
  });

const code = await runCli(process.argv.slice(2), deps);
done = true;
process.exitCode = code === 0 && lost && !serving ? PIPE_CLOSED : code;
setTimeout(() => process.exit(process.exitCode), 1_000).unref();
