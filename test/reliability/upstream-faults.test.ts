/**
 * Upstream faults: every failure mode of the simulated instance gets the documented
 * answer (docs/contract.md §3), other requests keep being served meanwhile, and nothing leaks.
 */
import { Server, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import type { Simulator } from '../../simulator/simulator.js';
import {
  type Harness,
  chatBody,
  eventually,
  expectedTokens,
  freshAgent,
  handleCounts,
  post,
  readyInstance,
  sseFrames,
  startHarness,
  startSim,
  streamTokens,
} from './harness.js';

let h: Harness;
let sim: Simulator;
let key: string;
let refusedKey: string;
let baseline: Record<string, number>;
let listenersAtStart: Record<string, number>;

/** Listeners on the long-lived emitters a request touches: a leak here grows with every request. */
function listeners(): Record<string, number> {
  const out: Record<string, number> = {};
  const count = (name: string, e: NodeJS.EventEmitter): void => {
    for (const ev of e.eventNames()) out[`${name}:${String(ev)}`] = e.listenerCount(ev);
  };
  count('process', process);
  count('data-plane', h.daemon.dataPlane.server);
  count('management', h.daemon.management.server);
  return out;
}

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

beforeAll(async () => {
  baseline = handleCounts();
  // Short time-outs so a hang costs a second, not five minutes; the defaults are tested below.
  h = await startHarness({ upstreamTimeoutMs: 1_500, idleTimeoutMs: 700, connectTimeoutMs: 1_000 });
  const s = await startSim({ chunks: 6 });
  sim = s.sim;
  key = await readyInstance(h, 'faults', s.url);
  refusedKey = await readyInstance(h, 'refused', `http://127.0.0.1:${await closedPort()}`);
  listenersAtStart = listeners();
});

afterAll(async () => {
  // Every fault below ran: no listener was left behind on the server or the process.
  expect(listeners()).toEqual(listenersAtStart);
  await h.stop();
  await sim.close();
  // Everything the daemon and simulator opened (sockets, servers, timers) is gone again. Compared
  // kind by kind as "not above the start": vitest's own hook timer may or may not be counted.
  const grown = (): string[] =>
    Object.entries(handleCounts())
      .filter(([k, n]) => n > (baseline[k] ?? 0))
      .map(([k, n]) => `${k}:${n}`);
  await eventually(() => grown().length === 0, 'handles back to the start', 10_000).catch((err: unknown) => {
    const servers = (process as unknown as { _getActiveHandles(): unknown[] })
      ._getActiveHandles()
      .filter((x): x is Server => x instanceof Server)
      .map((x) => JSON.stringify(x.address()));
    throw new Error(
      `${(err as Error).message}: start ${JSON.stringify(baseline)}, grown ${grown().join(' ')}; servers ${servers.join(' ')}`,
    );
  });
});

/** Runs one faulty request while a healthy one goes through, then checks nothing is left open. */
async function withHealthyNeighbour<T>(fault: () => Promise<T>): Promise<T> {
  const agent = freshAgent();
  const healthy = post(h.baseUrl, key, chatBody('neighbour', { stream: true }), {}, agent);
  const result = await fault();
  const ok = await healthy;
  expect(ok.status).toBe(200);
  expect(streamTokens(sseFrames(ok.text))).toEqual(expectedTokens(6));
  expect(ok.text.endsWith('data: [DONE]\n\n')).toBe(true);
  await agent.close();
  await eventually(() => sim.stats.inFlight === 0, 'no upstream request left running');
  await eventually(async () => {
    const n = await new Promise<number>((r, j) =>
      h.daemon.dataPlane.server.getConnections((e, c) => (e ? j(e) : r(c))),
    );
    return n === 0;
  }, 'no client connection left open');
  return result;
}

async function faulty(directive: string, stream: boolean, k = key): Promise<Awaited<ReturnType<typeof post>>> {
  const agent = freshAgent();
  try {
    return await post(h.baseUrl, k, chatBody(`go ${directive}`, { stream }), {}, agent);
  } finally {
    await agent.close();
  }
}

function lastUpstreamAborted(): boolean {
  const r = sim.requests.filter((x) => x.path === '/v1/chat/completions').at(-1);
  return r !== undefined && (r.aborted || r.completed || r.endedAt !== null);
}

describe('before headers', () => {
  it('connection refused: 502 upstream_unavailable', async () => {
    for (const stream of [false, true]) {
      const r = await withHealthyNeighbour(() => faulty('', stream, refusedKey));
      expect(r.status).toBe(502);
      expect(r.json).toEqual(
        obError('upstream_unavailable', {
          message: 'The model server refused the connection. Check that the instance is up and its endpoint is right.',
        }).toBody(),
      );
    }
  });

  it('reset before headers: 502 upstream_unavailable', async () => {
    for (const stream of [false, true]) {
      const r = await withHealthyNeighbour(() => faulty('[[sim fail=reset-before-headers]]', stream));
      expect(r.status).toBe(502);
      expect(r.json).toEqual(obError('upstream_unavailable').toBody());
    }
  });

  it('hang before headers: 504 upstream_timeout, and the upstream request is closed', async () => {
    for (const stream of [false, true]) {
      const r = await withHealthyNeighbour(() => faulty('[[sim fail=hang]]', stream));
      expect(r.status).toBe(504);
      expect(r.json).toEqual(obError('upstream_timeout').toBody());
      await eventually(() => lastUpstreamAborted(), 'hung upstream request closed by the proxy');
    }
  });

  it('500 with an HTML body: passed on as 500 in the OpenAI shape, without the HTML', async () => {
    for (const stream of [false, true]) {
      const r = await withHealthyNeighbour(() => faulty('[[sim fail=html-500]]', stream));
      expect(r.status).toBe(500);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.json).toEqual({
        error: {
          message: 'Model server error (HTTP 500): The model server answered HTTP 500 without an error message.',
          type: 'api_error',
          code: 'upstream_error',
          param: null,
        },
      });
    }
  });

  it('an error status with an Ollama JSON body: same status, its message', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=http-error errorStatus=503]]', false));
    expect(r.status).toBe(503);
    expect(r.json).toEqual({
      error: {
        message: 'Model server error (HTTP 503): server busy, please try again.  maximum pending requests exceeded',
        type: 'api_error',
        code: 'upstream_error',
        param: null,
      },
    });
  });

  it('invalid JSON (non-streaming): 502 upstream_error, not a half body', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=invalid-json]]', false));
    expect(r.status).toBe(502);
    expect(r.json).toEqual(
      obError('upstream_error', {
        message: "The model server sent an answer that is not a chat completion. Check the instance's endpoint.",
      }).toBody(),
    );
  });

  it('reset mid-body (non-streaming): 502 upstream_unavailable', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=drop-mid-stream]]', false));
    expect(r.status).toBe(502);
    expect(r.json).toEqual(obError('upstream_unavailable').toBody());
  });

  it('slow drip within the idle time-out: the whole answer arrives', async () => {
    const plain = await withHealthyNeighbour(() => faulty('[[sim fail=slow-drip tokensPerSecond=20 chunks=5]]', false));
    expect(plain.status).toBe(200);
    expect((plain.json as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(
      expectedTokens(5).join(''),
    );
    const stream = await withHealthyNeighbour(() => faulty('[[sim fail=slow-drip tokensPerSecond=20 chunks=5]]', true));
    expect(stream.status).toBe(200);
    expect(streamTokens(sseFrames(stream.text))).toEqual(expectedTokens(5));
    expect(stream.text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('slow drip slower than the idle time-out (non-streaming): 504 upstream_timeout', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=slow-drip tokensPerSecond=1 chunks=4]]', false));
    expect(r.status).toBe(504);
    expect(r.json).toEqual(obError('upstream_timeout').toBody());
  });
});

describe('mid-stream: one SSE error event, no [DONE], a clean end', () => {
  function errorEvent(frames: string[]): unknown {
    const last = frames.at(-1) ?? '';
    expect(last.startsWith('data: {"error"')).toBe(true);
    return JSON.parse(last.slice(6));
  }

  it('reset mid-stream: the chunks sent so far, then upstream_unavailable', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=drop-mid-stream failAfterChunks=3]]', true));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    expect(streamTokens(frames)).toEqual(expectedTokens(3));
    expect(r.text).not.toContain('[DONE]');
    expect(errorEvent(frames)).toEqual(obError('upstream_unavailable').toBody());
  });

  it('hang mid-stream: upstream_timeout after the idle time-out, and the upstream request is closed', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=hang-mid-stream failAfterChunks=2]]', true));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    expect(streamTokens(frames)).toEqual(expectedTokens(2));
    expect(r.text).not.toContain('[DONE]');
    expect(errorEvent(frames)).toEqual(
      obError('upstream_timeout', {
        message: 'The model server sent nothing for too long; the stream was ended.',
      }).toBody(),
    );
    await eventually(() => lastUpstreamAborted(), 'hung upstream stream closed by the proxy');
  });

  it('clean EOF before [DONE]: upstream_unavailable', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=eof-mid-stream failAfterChunks=2]]', true));
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
    expect(errorEvent(sseFrames(r.text))).toEqual(
      obError('upstream_unavailable', {
        message: 'The model server ended the stream before it was complete.',
      }).toBody(),
    );
  });

  it('invalid JSON in a stream: no broken event reaches the client, an error event ends it', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=invalid-json]]', true));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    // Every event the client gets parses: an SDK would throw on a broken one.
    for (const f of frames) expect(() => JSON.parse(f.slice(6)) as unknown).not.toThrow();
    expect(errorEvent(frames)).toEqual(
      obError('upstream_error', {
        message: 'The model server sent an event that is not valid JSON; the stream was ended.',
      }).toBody(),
    );
  });

  it('bytes that are not an event stream: an error event, no garbage forwarded', async () => {
    const r = await withHealthyNeighbour(() => faulty('[[sim fail=garbage]]', true));
    expect(r.status).toBe(200);
    expect(sseFrames(r.text)).toEqual([
      `data: ${JSON.stringify(obError('upstream_unavailable', { message: 'The model server ended the stream before it was complete.' }).toBody())}`,
    ]);
  });
});

describe('time-out configuration', () => {
  it('defaults suit a model that needs minutes to load; each time-out is separate', async () => {
    const { resolveConfig } = await import('../../src/config-resolve.js');
    const d = resolveConfig({ home: '/tmp/x' }, {}, '/tmp');
    expect({ connect: d.connectTimeoutMs, firstByte: d.upstreamTimeoutMs, idle: d.idleTimeoutMs }).toEqual({
      connect: 10_000,
      firstByte: 300_000,
      idle: 300_000,
    });
    const e = resolveConfig(
      { home: '/tmp/x', upstreamTimeout: '600' },
      { OB_PROXY_CONNECT_TIMEOUT: '2', OB_PROXY_IDLE_TIMEOUT: '45' },
      '/tmp',
    );
    expect({ connect: e.connectTimeoutMs, firstByte: e.upstreamTimeoutMs, idle: e.idleTimeoutMs }).toEqual({
      connect: 2_000,
      firstByte: 600_000,
      idle: 45_000,
    });
    // --upstream-timeout alone sets both the time to headers and the idle time (docs/contract.md §3).
    expect(resolveConfig({ home: '/tmp/x', upstreamTimeout: '90' }, {}, '/tmp').idleTimeoutMs).toBe(90_000);
  });
});
