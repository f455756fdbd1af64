/**
 * Real model servers for the conformance tier (test/conformance/): Ollama and llama.cpp's
 * `llama-server`, on tiny random-weight models, from the `realup` folder beside the checkout
 * (`<repo>/../shared/realup`), `OB_PROXY_REALUP`, or `/work/shared/realup`. Where none is found,
 * the tier skips and says which folders it looked for (`REALUP_SKIP`).
 *
 * Each server runs on a free port with one thread, is ready within a bounded wait, and writes its
 * log where a test can read it (a cancelled generation shows there as `cancel task`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, link, mkdir, mkdtemp, readFile, readdir, rename, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from './free-port.js';

const REPO = resolve(import.meta.dirname, '../..');

/** Where the tier looks, in order. */
export const REALUP_CANDIDATES: readonly string[] = [
  resolve(REPO, '../shared/realup'),
  ...(process.env.OB_PROXY_REALUP ? [resolve(process.env.OB_PROXY_REALUP)] : []),
  '/work/shared/realup',
];

const isRealup = (dir: string): boolean =>
  existsSync(join(dir, 'start-ollama')) && existsSync(join(dir, 'start-llama-server'));

/** The folder found, or null. */
export const REALUP_DIR: string | null = REALUP_CANDIDATES.find(isRealup) ?? null;

/** Why the tier does not run here, or null when it does. */
export const REALUP_SKIP: string | null =
  REALUP_DIR === null
    ? `no real model servers: none of ${REALUP_CANDIDATES.join(', ')} holds start-ollama and start-llama-server (set OB_PROXY_REALUP to the realup folder)`
    : null;

/** The library folders whose links the loader follows. */
const LIB_DIRS = ['bin', 'ollama/lib/ollama'];

/**
 * A file that stands for a link: a few bytes naming a sibling file. A copy of the folder made by
 * a tool that does not keep symbolic links (some archives and syncs) leaves these, and the loader
 * refuses them ("file too short").
 */
function linkStub(dir: string, name: string, size: number): string | null {
  if (size > 255) return null;
  const target = readFileSync(join(dir, name), 'utf8').trim();
  return /^[\w.+-]+$/.test(target) && target !== name && existsSync(join(dir, target)) ? target : null;
}

async function stubsOf(root: string): Promise<Map<string, string>> {
  const stubs = new Map<string, string>();
  for (const rel of LIB_DIRS) {
    const dir = join(root, rel);
    if (!existsSync(dir)) continue;
    for (const e of await readdir(dir, { withFileTypes: true })) {
      if (!e.isFile()) continue;
      const target = linkStub(dir, e.name, (await stat(join(dir, e.name))).size);
      if (target !== null) stubs.set(join(rel, e.name), target);
    }
  }
  return stubs;
}

async function mirror(from: string, to: string, rel: string, stubs: Map<string, string>): Promise<void> {
  await mkdir(join(to, rel), { recursive: true });
  for (const e of await readdir(join(from, rel), { withFileTypes: true })) {
    const r = join(rel, e.name);
    if (e.isDirectory()) await mirror(from, to, r, stubs);
    else if (stubs.has(r)) await symlink(stubs.get(r)!, join(to, r));
    else await link(join(from, r), join(to, r)).catch(() => copyFile(join(from, r), join(to, r)));
  }
}

async function listFiles(root: string, rel: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(root, rel), { withFileTypes: true })) {
    const r = join(rel, e.name);
    if (e.isDirectory()) out.push(...(await listFiles(root, r)));
    else out.push(r);
  }
  return out.sort();
}

let usable: Promise<string> | null = null;

/**
 * The folder the servers run from: REALUP_DIR itself, or, where its library links were flattened
 * into files, a private copy with the links restored (hard links where the file system allows),
 * made once per machine and named for what it was made from (every file's path, size and time).
 */
export function realupRoot(): Promise<string> {
  usable ??= (async () => {
    if (REALUP_DIR === null) throw new Error(REALUP_SKIP!);
    const stubs = await stubsOf(REALUP_DIR);
    if (stubs.size === 0) return REALUP_DIR;
    const hash = createHash('sha256').update(REALUP_DIR);
    for (const file of await listFiles(REALUP_DIR, '.')) {
      const st = await stat(join(REALUP_DIR, file));
      hash.update(`${file} ${st.size} ${st.mtimeMs}\n`);
    }
    const stamp = hash.digest('hex').slice(0, 12);
    const target = join(tmpdir(), `ob-proxy-realup-${stamp}`);
    if (existsSync(join(target, 'start-ollama'))) return target;
    const building = await mkdtemp(join(tmpdir(), 'ob-proxy-realup-new-'));
    await mirror(REALUP_DIR, building, '.', stubs);
    // Another test file may have made it meanwhile: its copy is as good as this one.
    await rename(building, target).catch(() => rm(building, { recursive: true, force: true }));
    return target;
  })();
  return usable;
}

export interface RealServer {
  /** e.g. "http://127.0.0.1:PORT": the model server's root, as an instance's endpoint. */
  readonly url: string;
  readonly name: string;
  /** The server's log so far (Ollama's serve.log holds its runner's lines too). */
  log(): Promise<string>;
  stop(): Promise<void>;
}

/** The environment every server gets: one thread, so two servers and the tests share two cores. */
const SERVER_ENV = { THREADS: '1' };

interface Spawned {
  proc: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

function spawnGroup(cmd: string, args: string[], env: Record<string, string>): Spawned {
  // Its own process group, so that stop() ends the script and the server it started, by its id.
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const output: string[] = [];
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => output.push(s));
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => output.push(s));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { proc, output, exited };
}

async function stopGroup(s: Spawned): Promise<void> {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null || s.proc.pid === undefined) return;
  const pid = s.proc.pid;
  const signal = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-pid, sig);
    } catch {
      // Already gone.
    }
  };
  signal('SIGTERM');
  const killed = setTimeout(() => signal('SIGKILL'), 5_000);
  await s.exited;
  clearTimeout(killed);
  // Whatever of the group outlived its leader (a runner the server started).
  signal('SIGKILL');
}

/** Resolves when `ready` answers true; rejects with the server's output after `timeoutMs`. */
async function waitReady(s: Spawned, what: string, ready: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (s.proc.exitCode !== null || s.proc.signalCode !== null)
      throw new Error(`${what} exited ${s.proc.exitCode ?? s.proc.signalCode}: ${s.output.join('').slice(-2000)}`);
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) {
      await stopGroup(s);
      throw new Error(`${what} was not ready within ${timeoutMs} ms: ${s.output.join('').slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Real Ollama serving `gemma4:26b` (Qwen2.5 template) and `qwen3.6:27b` (Gemma 4 template), each
 * with a context of `ctx` tokens (its default here is 4096).
 */
export async function startOllama(o: { ctx?: number } = {}): Promise<RealServer> {
  const root = await realupRoot();
  const port = await freePort();
  const state = await mkdtemp(join(tmpdir(), 'obr-ollama-'));
  const env = { ...SERVER_ENV, ...(o.ctx === undefined ? {} : { OLLAMA_CONTEXT_LENGTH: String(o.ctx) }) };
  const s = spawnGroup(join(root, 'start-ollama'), [String(port), state], env);
  // It creates both models before it says so: a few seconds, more on a loaded machine.
  await waitReady(s, 'start-ollama', async () => s.output.join('').includes('ollama serving'), 90_000);
  return {
    url: `http://127.0.0.1:${port}`,
    name: 'ollama',
    log: () => readFile(join(state, 'serve.log'), 'utf8'),
    stop: async () => {
      await stopGroup(s);
      await rm(state, { recursive: true, force: true });
    },
  };
}

export interface LlamaOptions {
  /** The model id it serves (it answers as this whatever the request names). */
  alias: string;
  /** The model with Google's Gemma 4 chat template (reasoning_content) instead of Qwen2.5's. */
  gemma4?: boolean;
  /** Context tokens shared by the slots (CTX), and the number of slots (NP). */
  ctx?: number;
  slots?: number;
}

/** llama.cpp's `llama-server`, ready when GET /health answers 200. */
export async function startLlamaServer(o: LlamaOptions): Promise<RealServer> {
  const root = await realupRoot();
  const port = await freePort();
  const env = { ...SERVER_ENV, CTX: String(o.ctx ?? 8192), NP: String(o.slots ?? 4) };
  const s = spawnGroup(
    join(root, 'start-llama-server'),
    [String(port), o.alias, ...(o.gemma4 === true ? ['--gemma4'] : [])],
    env,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitReady(s, 'start-llama-server', async () => (await fetch(`${url}/health`)).status === 200, 30_000);
  return {
    url,
    name: `llama-server ${o.alias}`,
    log: async () => s.output.join(''),
    stop: () => stopGroup(s),
  };
}
