/**
 * Three `ob-proxy serve` processes on one PostgreSQL (a fresh database on the local
 * server). A key created on any node works on every node; a key revoked or an instance stopped
 * on any node is refused on every node, measured by a client polling each node (figures in
 * docs/scale-out.md; no timing is asserted, only that every node refuses in the end). Then the
 * same with NOTIFY suppressed: the catch-up read alone. Then kill -9 of a node under load.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { DaemonClient } from '../../cli/daemon-client.js';
import {
  type ServeProcess,
  type SimProcess,
  eventually,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';

const MODEL = 'gemma4:26b';
const REVOCATIONS = Number(process.env.OB_PROXY_TEST_REVOCATIONS ?? 200);

interface Node {
  name: string;
  serve: ServeProcess;
  api: DaemonClient;
  pool: Pool;
}

let sim: SimProcess;

beforeAll(async () => {
  sim = await startSimulate([MODEL], ['--chunks', '1']);
});
afterAll(async () => {
  await sim?.stop();
});

async function startNode(name: string, url: string, env: Record<string, string> = {}, home?: string): Promise<Node> {
  const h = home ?? (await tmpHome());
  const serve = await startServe(h, ['--store', url], env);
  return {
    name,
    serve,
    api: new DaemonClient(join(h, 'ob-proxy.sock')),
    pool: new Pool(serve.baseUrl, { connections: 2 }),
  };
}

async function stopNode(n: Node): Promise<void> {
  await n.api.close().catch(() => {});
  await n.pool.close().catch(() => {});
  const t = Date.now();
  await n.serve.stop();
  if (Date.now() - t > 3000)
    console.log(n.name, Date.now() - t, n.serve.lines.slice(-8).join('\n'), n.serve.stderr.join(''));
}

/** The status a node answers for the key (GET /v1/models: authenticated, never goes upstream). */
async function statusOn(n: Node, secret: string): Promise<number> {
  const res = await n.pool.request({
    method: 'GET',
    path: '/v1/models',
    headers: { authorization: `Bearer ${secret}` },
  });
  await res.body.dump();
  return res.statusCode;
}

async function chatOn(n: Node, secret: string): Promise<number> {
  const res = await n.pool.request({
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.body.dump();
  return res.statusCode;
}

/** Polls one node until it refuses the key; resolves with the time it first did. */
async function refusedAt(n: Node, secret: string): Promise<number> {
  const deadline = performance.now() + 15_000;
  for (;;) {
    const s = await statusOn(n, secret);
    if (s === 401 || s === 404) return performance.now();
    if (s !== 200) throw new Error(`${n.name} answered ${s}`);
    if (performance.now() > deadline) throw new Error(`${n.name} still serves a revoked key after 15 s`);
  }
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

function figures(ms: number[]): { n: number; p50: number; p99: number; max: number } {
  const r = (x: number): number => Math.round(x * 10) / 10;
  return { n: ms.length, p50: r(percentile(ms, 50)), p99: r(percentile(ms, 99)), max: r(Math.max(...ms)) };
}

/** Revokes `count` keys, each created on one node and revoked on another; times until every node refuses. */
async function measureRevocations(
  nodes: Node[],
  instance: string,
  count: number,
): Promise<{ afterAck: number[]; afterCall: number[] }> {
  const afterAck: number[] = [];
  const afterCall: number[] = [];
  for (let i = 0; i < count; i++) {
    const creator = nodes[i % nodes.length]!;
    const revoker = nodes[(i + 1) % nodes.length]!;
    const { id, secret } = await creator.api.createKey(instance, `k${i}`);
    for (const n of nodes)
      await eventually(async () => (await statusOn(n, secret)) === 200, `${n.name} serves key ${i}`, 15_000);
    const t0 = performance.now();
    // Every node polled from before the revocation is sent.
    const polls = nodes.map((n) => refusedAt(n, secret));
    await revoker.api.revokeKey(id);
    const ack = performance.now();
    const last = Math.max(...(await Promise.all(polls)));
    afterAck.push(Math.max(0, last - ack));
    afterCall.push(last - t0);
  }
  return { afterAck, afterCall };
}

describe('three daemons on one PostgreSQL', () => {
  let db: TestDatabase;
  let nodes: Node[] = [];

  beforeAll(async () => {
    db = await freshDatabase();
    // Started together: the schema is migrated once, under the advisory lock.
    nodes = await Promise.all(['A', 'B', 'C'].map((n) => startNode(n, db.url)));
  });
  afterAll(async () => {
    await Promise.all(nodes.map(stopNode));
    await db?.drop();
  }, 90_000);

  it("a key created on A works on B and C; revoked on B it is refused everywhere, and C's live events show it", async () => {
    const [a, b, c] = nodes as [Node, Node, Node];
    await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
    const ready = await a.api.ready('gpu-1', { wait: true });
    const secret = ready.defaultKey!.secret!;
    for (const n of nodes) await eventually(async () => (await chatOn(n, secret)) === 200, `${n.name} serves the key`);
    // Management on any node sees the same state.
    expect((await c.api.listInstances()).map((i) => [i.id, i.state])).toEqual([['gpu-1', 'ready']]);

    const seen: AuditEvent[] = [];
    const follow = new AbortController();
    let opened!: () => void;
    const open = new Promise<void>((r) => {
      opened = r;
    });
    const following = c.api
      .follow(
        (e) => seen.push(e),
        follow.signal,
        () => opened(),
      )
      .catch(() => {});
    await open;
    await b.api.revokeKey(ready.defaultKey!.id);
    for (const n of nodes) await eventually(async () => (await chatOn(n, secret)) === 401, `${n.name} refuses the key`);
    await eventually(
      () => seen.some((e) => e.type === 'key.revoked' && e.keyId === ready.defaultKey!.id),
      "C's live events show the revocation made on B",
    );
    follow.abort();
    await following;
  });

  it('an instance stopped on C: its keys are refused on every node', async () => {
    const [a, , c] = nodes as [Node, Node, Node];
    const k = await a.api.createKey('gpu-1', 'team');
    for (const n of nodes)
      await eventually(async () => (await statusOn(n, k.secret)) === 200, `${n.name} serves the key`);
    await c.api.move('gpu-1', 'stop');
    for (const n of nodes)
      await eventually(async () => (await statusOn(n, k.secret)) === 401, `${n.name} refuses the key`);
    await a.api.ready('gpu-1', { wait: true });
  });

  it(
    `${REVOCATIONS} revocations: every node refuses each revoked key (time until the last node refuses, reported)`,
    { timeout: 240_000 },
    async () => {
      const { afterAck, afterCall } = await measureRevocations(nodes, 'gpu-1', REVOCATIONS);
      expect(afterAck).toHaveLength(REVOCATIONS);
      console.log(
        JSON.stringify({
          suite: 'scale-out',
          notify: true,
          afterAck: figures(afterAck),
          afterCall: figures(afterCall),
        }),
      );
    },
  );
});

// The catch-up daemons run at the default period (500 ms): docs/contract.md §4's 1 s bound must
// hold with every notification lost. Timings are reported, not asserted (a shared machine).
describe('NOTIFY suppressed: the catch-up read alone', () => {
  let db: TestDatabase;
  let nodes: Node[] = [];

  beforeAll(async () => {
    db = await freshDatabase();
    const env = { OB_PROXY_TEST_NO_NOTIFY: '1' };
    nodes = await Promise.all(['A', 'B', 'C'].map((n) => startNode(n, db.url, env)));
  });
  afterAll(async () => {
    await Promise.all(nodes.map(stopNode));
    await db?.drop();
  }, 90_000);

  it(
    'every node still refuses each revoked key (within one default catch-up period, reported)',
    { timeout: 240_000 },
    async () => {
      await nodes[0]!.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
      await nodes[0]!.api.ready('gpu-1', { wait: true });
      const { afterAck, afterCall } = await measureRevocations(nodes, 'gpu-1', 10);
      console.log(
        JSON.stringify({
          suite: 'scale-out',
          notify: false,
          catchupMs: 'default',
          afterAck: figures(afterAck),
          afterCall: figures(afterCall),
        }),
      );
    },
  );
});

describe('kill -9 of a node under load', () => {
  let db: TestDatabase;
  let nodes: Node[] = [];

  beforeAll(async () => {
    db = await freshDatabase();
    nodes = await Promise.all(['A', 'B', 'C'].map((n) => startNode(n, db.url)));
  });
  afterAll(async () => {
    await Promise.all(nodes.map(stopNode));
    await db?.drop();
  }, 90_000);

  it(
    'the others keep serving with no error; the restarted node rejoins, with what changed meanwhile',
    { timeout: 60_000 },
    async () => {
      const [a, b, c] = nodes as [Node, Node, Node];
      await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
      const secret = (await a.api.ready('gpu-1', { wait: true })).defaultKey!.secret!;
      const doomed = await b.api.createKey('gpu-1', 'doomed');
      for (const n of nodes)
        await eventually(async () => (await chatOn(n, secret)) === 200, `${n.name} serves the key`);

      const statuses: number[] = [];
      let loading = true;
      const load = Promise.all(
        [a, b].map(async (n) => {
          while (loading) statuses.push(await chatOn(n, secret).catch(() => -1));
        }),
      );
      await eventually(() => statuses.length > 50, 'load running');
      c.serve.proc.kill('SIGKILL');
      await c.serve.exited;
      // While C is down: a revocation on A, and requests go on.
      await a.api.revokeKey(doomed.id);
      const before = statuses.length;
      await eventually(() => statuses.length > before + 100, 'load goes on');
      const restarted = await startNode('C', db.url, {}, c.serve.home);
      nodes[2] = restarted;
      await c.api.close().catch(() => {});
      await c.pool.close().catch(() => {});
      await eventually(async () => (await chatOn(restarted, secret)) === 200, 'C serves again');
      expect(await statusOn(restarted, doomed.secret)).toBe(401);
      loading = false;
      await load;
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      console.log(JSON.stringify({ suite: 'scale-out', nodeKill: { requests: statuses.length, errors: 0 } }));
    },
  );
});
