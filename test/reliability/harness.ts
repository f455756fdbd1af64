/**
 * In-process daemon + simulated instances on real sockets, for the reliability suites. In-process
 * (rather than `ob-proxy serve`) so a suite can count the daemon's handles, read its logs as
 * objects and shorten its time-outs; the sockets, Fastify, undici and the store are the real ones.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Agent, request as undiciRequest } from 'undici';
import { afterAll, beforeAll } from 'vitest';
import { type Config } from '../../src/config.js';
import { resolveConfig } from '../../src/config-resolve.js';
import type { Store } from '../../src/store/store.js';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { buildSimulator, type Simulator, type SimulatorOptions } from '../../simulator/simulator.js';
import { eventually } from '../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';

export const MODEL = 'gemma4:26b';

export interface Harness {
  daemon: Daemon;
  config: Config;
  baseUrl: string;
  home: string;
  /** Every log object the daemon wrote. */
  logs: Record<string, unknown>[];
  /** Every log line as written (to scan raw text for secrets). */
  rawLogs: string[];
  stop(): Promise<void>;
}

export function tmpHome(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'obr-'));
}

/** Starts a daemon on port 0 with a private home; `patch` overrides resolved config fields. */
export async function startHarness(
  patch: Partial<Config> = {},
  opts: { store?: Store; home?: string; env?: Record<string, string> } = {},
): Promise<Harness> {
  const home = opts.home ?? (await tmpHome());
  // OB_PROXY_TEST_STORE=postgres runs a suite against a fresh PostgreSQL database of its own
  // (suites that read db.json themselves do not apply).
  const db: TestDatabase | undefined =
    process.env.OB_PROXY_TEST_STORE === 'postgres' && opts.store === undefined && patch.store === undefined
      ? await freshDatabase()
      : undefined;
  const config: Config = {
    ...resolveConfig({ home, port: 0 }, opts.env ?? {}, home),
    logLevel: 'info',
    ...(db === undefined ? {} : { store: db.url }),
    ...patch,
  };
  const logs: Record<string, unknown>[] = [];
  const rawLogs: string[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue;
        rawLogs.push(line);
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          logs.push({ unparsable: line });
        }
      }
      done();
    },
  });
  const daemon = await startDaemon(config, {
    version: 'test',
    logStream,
    ...(opts.store === undefined ? {} : { store: opts.store }),
  });
  return {
    daemon,
    config,
    baseUrl: daemon.ctx.baseUrl,
    home,
    logs,
    rawLogs,
    stop: async () => {
      await daemon.shutdown(0);
      await db?.drop();
    },
  };
}

export async function startSim(options: Partial<SimulatorOptions> = {}): Promise<{ sim: Simulator; url: string }> {
  const sim = buildSimulator({ models: [MODEL], ...options });
  const url = await sim.listen(0, '127.0.0.1');
  return { sim, url };
}

/** Adds a ready instance pointing at `endpoint`; returns its default key's secret. */
export async function readyInstance(h: Harness, id: string, endpoint: string, model = MODEL): Promise<string> {
  const lc = h.daemon.ctx.lifecycle;
  await lc.addInstance({ id, model, endpoint });
  const { defaultKey } = await lc.ready(id);
  const key = await defaultKey;
  if (key === null) throw new Error('no default key');
  const secret = lc.claimSecret(key.id);
  if (secret === null) throw new Error('default secret already claimed');
  return secret;
}

export interface ReadySetup {
  h: Harness;
  sim: Simulator;
  /** The simulator's base URL. */
  url: string;
  /** The default key's secret of the ready instance. */
  key: string;
}

/**
 * For a suite: a daemon and a simulator, started in beforeAll with one ready instance pointing at
 * the simulator, and both stopped in afterAll. The fields are set once beforeAll has run.
 */
export function setupReadyInstance(
  opts: { id?: string; sim?: Partial<SimulatorOptions>; config?: Partial<Config> } = {},
): ReadySetup {
  const s = {} as ReadySetup;
  beforeAll(async () => {
    s.h = await startHarness(opts.config);
    const started = await startSim(opts.sim);
    s.sim = started.sim;
    s.url = started.url;
    s.key = await readyInstance(s.h, opts.id ?? 'gpu-1', started.url);
  });
  afterAll(async () => {
    await s.h?.stop();
    await s.sim?.close();
  });
  return s;
}

export function chatBody(content: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: MODEL, messages: [{ role: 'user', content }], ...extra };
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: unknown;
}

/** A fresh connection per dispatcher: no keep-alive reuse between calls unless the caller shares one. */
export const freshAgent = (): Agent => new Agent({ pipelining: 0, keepAliveTimeout: 10 });

export async function post(
  baseUrl: string,
  key: string | null,
  body: unknown,
  headers: Record<string, string> = {},
  dispatcher?: Agent,
): Promise<Reply> {
  const res = await undiciRequest(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...headers,
    },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    ...(dispatcher === undefined ? {} : { dispatcher }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: parseOrNull(text) };
}

export function parseOrNull(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** SSE frames of a complete stream body. */
export function sseFrames(text: string): string[] {
  return text.split('\n\n').filter((f) => f !== '');
}

/** The content tokens of a stream, in order, from the `data:` frames. */
export function streamTokens(frames: string[]): string[] {
  const out: string[] = [];
  for (const f of frames) {
    if (!f.startsWith('data: {')) continue;
    const parsed = JSON.parse(f.slice(6)) as { choices?: { delta?: { content?: string } }[] };
    const c = parsed.choices?.[0]?.delta?.content;
    if (typeof c === 'string' && c !== '') out.push(c);
  }
  return out;
}

/** "t0 t1 … t{n-1} ": what the simulator sends, so a client can check nothing was lost or reordered. */
export function expectedTokens(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `t${i} `);
}

/** Active handles by kind (sockets, timers, servers…), to compare before and after. */
export function handleCounts(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) out[r] = (out[r] ?? 0) + 1;
  return out;
}

export function errorShape(json: unknown): boolean {
  if (typeof json !== 'object' || json === null) return false;
  const e = (json as { error?: unknown }).error;
  if (typeof e !== 'object' || e === null) return false;
  const { message, type, code, param } = e as Record<string, unknown>;
  return (
    typeof message === 'string' &&
    message !== '' &&
    typeof type === 'string' &&
    typeof code === 'string' &&
    (param === null || typeof param === 'string') &&
    Object.keys(e).length === 4
  );
}

export { eventually };

/**
 * Waits until a simulated stream stops sending because its reader (the proxy) stopped reading:
 * its count of chunks sent, once some were, is the same at two polls in a row.
 */
export async function untilHeldBack(up: { chunksSent: number }, timeoutMs = 15_000): Promise<void> {
  let last = -1;
  await eventually(
    () => {
      const settled = up.chunksSent > 0 && up.chunksSent === last;
      last = up.chunksSent;
      return settled;
    },
    'upstream held back by back-pressure',
    timeoutMs,
  );
}
