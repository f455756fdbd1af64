/**
 * A daemon's shutdown: the drain ends idle connections, and the usage counted is written.
 * One describe per defect found, its story above it.
 */
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Mutation } from '../../src/store/store.js';
import {
  chatBody,
  eventually,
  type Harness,
  post,
  readyInstance,
  startHarness,
  startSim,
} from '../reliability/harness.js';

/**
 * Regression (SIGTERM drain): server.close() waited for keep-alive connections that
 * went idle during the drain (their last stream ended) until their 65 s keep-alive time-out, so
 * the grace period always ran out and a stop with streams in flight took the whole grace period,
 * then force-closed. Now idle connections are closed as soon as they are idle.
 */
describe('the drain closes idle keep-alive connections at once', () => {
  let h: Harness;
  let sim: Simulator;
  let key: string;
  beforeAll(async () => {
    h = await startHarness();
    const s = await startSim();
    sim = s.sim;
    key = await readyInstance(h, 'drain', s.url);
  });
  afterAll(() => sim.close());

  it('a drain with keep-alive clients ends when their streams end, not when the grace period does', async () => {
    const agent = new Agent({ keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
    const streams = Array.from({ length: 5 }, async () => {
      const r = await request(`${h.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(chatBody('[[sim tokensPerSecond=20 chunks=10]]', { stream: true })),
      });
      return r.body.text();
    });
    await eventually(() => sim.stats.inFlight === 5, 'streams under way');
    // A grace period far longer than this test's time-out: the bug made shutdown wait all of it.
    await h.daemon.shutdown(120_000);
    for (const text of await Promise.all(streams)) expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(h.logs.some((l) => l.msg === 'grace period over: closing remaining connections')).toBe(false);
    await agent.close();
  }, 20_000);
});

/**
 * Regression (accounting and limits): a shutdown (SIGTERM) took the usage
 * counted since the last flush and wrote it, but a periodic flush still being written at that
 * moment was not waited for. When that write then failed (a store out of reach: the database
 * down at the moment of a restart), its counters were put back into a tracker nobody would flush
 * again: the requests and tokens of up to one flush period were lost, and the shutdown said
 * "stopped", exit 0, as if everything had been written.
 * Now the shutdown waits for the flush in progress before taking what is left, so counters put
 * back by a failed flush are written by the shutdown's own, or reported lost with it.
 */
describe('the shutdown waits for the usage flush in flight', () => {
  /**
   * A store whose next usage write is held, then fails: when the shutdown writes, or when the store
   * is closed (as a query in flight fails when a PostgreSQL store's pool is ended).
   */
  class HeldUsageStore extends MemoryStore {
    hold = false;
    held: (() => void) | null = null;
    draining = (): boolean => false;

    override async commit(mutations: readonly Mutation[]): Promise<void> {
      if (this.draining()) this.held?.();
      if (this.hold && mutations.some((m) => m.op === 'addUsage')) {
        this.hold = false;
        await new Promise<void>((r) => {
          this.held = r;
        });
        throw obError('store_write_failed');
      }
      return super.commit(mutations);
    }

    override async close(): Promise<void> {
      this.held?.();
      await super.close();
    }
  }

  let h: Harness;
  let sim: Simulator;
  let key: string;
  const store = new HeldUsageStore();

  beforeAll(async () => {
    h = await startHarness({ usageFlushMs: 20 }, { store });
    const s = await startSim({ chunks: 4 });
    sim = s.sim;
    key = await readyInstance(h, 'gpu-1', s.url);
    store.draining = () => h.daemon.ctx.draining;
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('a flush in flight at shutdown that fails is written by the shutdown', async () => {
    store.hold = true;
    const r = await post(h.baseUrl, key, chatBody('counted'));
    expect(r.status).toBe(200);
    // The periodic flush has taken this request's counters and is writing them.
    await eventually(() => store.held !== null, 'a usage flush held');
    // Counted after it: for the next flush, or the shutdown's.
    expect((await post(h.baseUrl, key, chatBody('counted too'))).status).toBe(200);
    await h.daemon.shutdown(0);
    const keyId = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!.id;
    const stored = (await store.load()).keys.find((k) => k.id === keyId)!;
    expect({ requests: stored.usage.requests, completion: stored.usage.completionTokens }).toEqual({
      requests: 2,
      completion: 8,
    });
  });
});
