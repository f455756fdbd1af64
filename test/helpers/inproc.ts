/**
 * A whole daemon in process, built and never listening (daemon/build-daemon.ts `buildDaemon`):
 * both planes answer `inject()`, the store is in memory, the clock and the secrets are injected,
 * so ids, secrets and timestamps are the same on every run and bodies can be compared whole.
 * The upstream is a real simulator on 127.0.0.1:0 (`startSim`): what it received is asserted.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { type Daemon, buildDaemon } from '../../daemon/build-daemon.js';
import {
  buildSimulator,
  type RecordedRequest,
  type Simulator,
  type SimulatorOptions,
} from '../../simulator/simulator.js';
import { type Config } from '../../src/config.js';
import { resolveConfig } from '../../src/config-resolve.js';
import type { SecretSource } from '../../src/domain/api-key.js';
import { MemoryStore } from '../../src/store/memory-store.js';

export const MODEL = 'gemma4:26b';
export const T0 = Date.parse('2026-11-23T12:00:00.000Z');

/** Time moves only when a test moves it. */
export class TestClock {
  constructor(public ms = T0) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Key ids k0000000000A, k0000000000B, …, and a random part made from the same counter. */
export function countingSecrets(): SecretSource {
  let n = 0;
  const digits = (v: number, width: number): string => {
    let out = '';
    for (let i = 0; i < width; i++) {
      out = BASE62[v % 62]! + out;
      v = Math.floor(v / 62);
    }
    return out;
  };
  return {
    keyId: () => `k${digits(++n, 11)}`,
    random: () => `r${digits(n, 31)}`,
  };
}

export interface Inproc {
  daemon: Daemon;
  config: Config;
  clock: TestClock;
  store: MemoryStore;
  /** Every log object the daemon wrote. */
  logs: Record<string, unknown>[];
  /** The data plane, as a client sees it. */
  chat(key: string | null, body: unknown, headers?: Record<string, string>): Promise<Answer>;
  /** The management plane, as the CLI sees it. */
  manage(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<Answer>;
  close(): Promise<void>;
}

export interface Answer {
  status: number;
  headers: LightMyRequestResponse['headers'];
  /** The parsed body, or null when it is not JSON. */
  json: unknown;
  text: string;
}

function answer(res: LightMyRequestResponse): Answer {
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch {
    json = null;
  }
  return { status: res.statusCode, headers: res.headers, json, text: res.body };
}

/** Builds a daemon that never listens; `patch` overrides resolved config fields. */
export async function buildInproc(
  patch: Partial<Config> = {},
  env: Record<string, string> = {},
  store = new MemoryStore(),
): Promise<Inproc> {
  const home = await mkdtemp(join(tmpdir(), 'obi-'));
  // Probes only when a route asks for one (`instances add`, `ready`): a test that listens on a
  // socket gets no periodic round, whose probes would land in the next test's upstream record.
  const config: Config = {
    ...resolveConfig({ home, port: 0 }, env, home),
    logLevel: 'info',
    probeIntervalMs: 0,
    ...patch,
  };
  const logs: Record<string, unknown>[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const clock = new TestClock();
  const daemon = await buildDaemon(config, { version: 'test', clock, store, secrets: countingSecrets(), logStream });
  return {
    daemon,
    config,
    clock,
    store,
    logs,
    chat: async (key, body, headers = {}) =>
      answer(
        await daemon.dataPlane.inject({
          method: 'POST',
          url: '/v1/chat/completions',
          headers: {
            'content-type': 'application/json',
            ...(key === null ? {} : { authorization: `Bearer ${key}` }),
            ...headers,
          },
          payload: typeof body === 'string' ? body : JSON.stringify(body),
        }),
      ),
    manage: async (method, url, body) =>
      answer(
        await daemon.management.inject({
          method,
          url,
          ...(body === undefined
            ? {}
            : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
        }),
      ),
    close: async () => {
      await daemon.shutdown(0);
      await rm(home, { recursive: true, force: true });
    },
  };
}

export async function startSim(options: Partial<SimulatorOptions> = {}): Promise<{ sim: Simulator; url: string }> {
  const sim = buildSimulator({ models: [MODEL], ...options });
  const url = await sim.listen(0, '127.0.0.1');
  return { sim, url };
}

/** What the simulator received on the chat route (its health probes are left out). */
export function chatRequests(sim: Simulator): RecordedRequest[] {
  return sim.requests.filter((r) => r.path === '/v1/chat/completions');
}
