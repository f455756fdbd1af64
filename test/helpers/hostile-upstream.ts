/**
 * A daemon with two instances: one on a hostile simulated model server, one on a healthy one.
 * Each regression about a hostile model server runs its fault while a paced stream to the
 * healthy instance goes on, and checks that stream ended whole: one bad server must not take
 * the gateway down.
 */
import { once } from 'node:events';
import { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect } from 'vitest';
import type { Config } from '../../src/config.js';
import type { RecordedRequest, Simulator } from '../../simulator/simulator.js';
import {
  type Harness,
  MODEL,
  type Reply,
  chatBody,
  eventually,
  expectedTokens,
  freshAgent,
  post,
  readyInstance,
  sseFrames,
  startHarness,
  startSim,
  streamTokens,
} from '../reliability/harness.js';

export interface HostilePair {
  h: Harness;
  hostile: Simulator;
  healthy: Simulator;
  hostileKey: string;
  healthyKey: string;
  stop(): Promise<void>;
}

export async function startHostilePair(patch: Partial<Config> = {}): Promise<HostilePair> {
  // Short time-outs, so a defect shows as a wrong answer within seconds rather than a hang.
  const h = await startHarness({ upstreamTimeoutMs: 5_000, idleTimeoutMs: 5_000, ...patch });
  const bad = await startSim({ chunks: 4 });
  const good = await startSim({ chunks: 10 });
  const hostileKey = await readyInstance(h, 'hostile', bad.url);
  const healthyKey = await readyInstance(h, 'healthy', good.url);
  return {
    h,
    hostile: bad.sim,
    healthy: good.sim,
    hostileKey,
    healthyKey,
    stop: async () => {
      await h.stop();
      await bad.sim.close();
      await good.sim.close();
    },
  };
}

/**
 * startHostilePair for a describe block: started before its tests, stopped after them. Read the
 * fields inside the tests: they are set once the hook has run.
 */
export function useHostilePair(patch: Partial<Config> = {}): HostilePair {
  const p = {} as HostilePair;
  beforeAll(async () => {
    Object.assign(p, await startHostilePair(patch));
  });
  afterAll(async () => {
    await p.stop();
  });
  return p;
}

/** One request to the hostile instance, on its own connection. */
export async function ask(p: HostilePair, directive: string, stream: boolean): Promise<Reply> {
  const agent = freshAgent();
  try {
    return await post(p.h.baseUrl, p.hostileKey, chatBody(`go ${directive}`, { stream }), {}, agent);
  } finally {
    await agent.close();
  }
}

/** Runs `fault` while a paced stream to the healthy instance goes on; that stream must end whole. */
export async function alongside<T>(p: HostilePair, fault: () => Promise<T>): Promise<T> {
  const agent = freshAgent();
  const healthy = post(
    p.h.baseUrl,
    p.healthyKey,
    chatBody('neighbour [[sim tokensPerSecond=40]]', { stream: true }),
    {},
    agent,
  );
  try {
    const result = await fault();
    const ok = await healthy;
    expect(ok.status).toBe(200);
    expect(streamTokens(sseFrames(ok.text))).toEqual(expectedTokens(10));
    expect(ok.text.endsWith('data: [DONE]\n\n')).toBe(true);
    return result;
  } finally {
    await agent.close();
  }
}

/** The hostile server's last chat request, once it has ended. */
export async function lastChatEnded(sim: Simulator): Promise<RecordedRequest> {
  let last: RecordedRequest | undefined;
  await eventually(
    () => {
      last = sim.requests.filter((r) => r.path === '/v1/chat/completions').at(-1);
      return last?.endedAt != null;
    },
    'the upstream request ended',
    10_000,
  );
  return last as RecordedRequest;
}

/** The request was cut by the proxy: the model server saw the connection close mid-answer. */
export async function expectUpstreamAborted(sim: Simulator): Promise<void> {
  const r = await lastChatEnded(sim);
  expect({ aborted: r.aborted, completed: r.completed }).toEqual({ aborted: true, completed: false });
}

/** The error events (`data: {"error"…}`) and whether `[DONE]` came. */
export function errorEvents(text: string): unknown[] {
  return sseFrames(text)
    .filter((f) => f.startsWith('data: {"error"'))
    .map((f) => JSON.parse(f.slice(6)) as unknown);
}

/** What a raw hostile model server is told of each chat request. */
export interface RawChat {
  stream: boolean;
  /** The last message's content: the test's instruction to the server. */
  content: string;
  headers: IncomingHttpHeaders;
}

export interface RawAnswer {
  status?: number;
  headers?: Record<string, string>;
  body: string | Buffer;
  /** Called before the status line is written (informational responses, say); returns false to write nothing more. */
  before?: (res: ServerResponse) => boolean | undefined;
}

export interface RawUpstream {
  url: string;
  /** How many chat requests it has answered. */
  answered: number;
  close(): Promise<void>;
}

/**
 * A model server written by hand, for answers the simulator cannot make (raw JSON such as
 * `1e308`, a chosen body byte for byte): every chat gets `answer(chat)`; `GET /v1/models` lists
 * `MODEL`, as the daemon's health probe expects.
 */
export async function startRawUpstream(answer: (chat: RawChat) => RawAnswer): Promise<RawUpstream> {
  const up: RawUpstream = { url: '', answered: 0, close: async () => undefined };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        stream?: boolean;
        messages?: { content: string }[];
      };
      const a = answer({
        stream: body.stream === true,
        content: body.messages?.at(-1)?.content ?? '',
        headers: req.headers,
      });
      up.answered += 1;
      if (a.before?.(res) === false) return;
      res.writeHead(
        a.status ?? 200,
        a.headers ?? { 'content-type': body.stream === true ? 'text/event-stream' : 'application/json' },
      );
      res.end(a.body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  up.close = async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  };
  return up;
}

export interface RawUpstreamDaemon {
  up: RawUpstream;
  h: Harness;
  /** gpu-1's default key's secret. */
  key: string;
}

/**
 * For a describe block: a model server written by hand answering `answer(chat)`, and a daemon
 * (`patch` over its config) with gpu-1 ready on it, started before its tests and stopped after
 * them. Read the fields inside the tests: they are set once the hook has run.
 */
export function useRawUpstreamDaemon(
  answer: (chat: RawChat) => RawAnswer,
  patch: Partial<Config> = {},
): RawUpstreamDaemon {
  const s = {} as RawUpstreamDaemon;
  beforeAll(async () => {
    s.up = await startRawUpstream(answer);
    s.h = await startHarness(patch);
    s.key = await readyInstance(s.h, 'gpu-1', s.up.url);
  });
  afterAll(async () => {
    await s.h.stop();
    await s.up.close();
  });
  return s;
}
