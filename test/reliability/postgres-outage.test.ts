/**
 * Kill -9 of PostgreSQL under two daemons (a server of its own, in a temp folder). While
 * it is away the daemons serve the keys they know; management changes fail with a one-line error
 * and exit 1; after --max-stale they refuse every key with 503 store_unreachable, Retry-After and
 * /readyz 503, and say so in their log. When it returns they catch up: every change made before
 * the crash, and a revocation made on one daemon while it was away, reach both.
 */
import { join } from 'node:path';
import { Pool } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import {
  type ServeProcess,
  type SimProcess,
  eventually,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { type Cluster, startCluster } from '../helpers/postgres.js';

const MODEL = 'gemma4:26b';
const MAX_STALE_S = 3;

interface Node {
  serve: ServeProcess;
  api: DaemonClient;
  pool: Pool;
  home: string;
}

let cluster: Cluster;
let sim: SimProcess;
const nodes: Node[] = [];

beforeAll(async () => {
  [cluster, sim] = await Promise.all([startCluster(), startSimulate([MODEL], ['--chunks', '1'])]);
  for (let i = 0; i < 2; i++) {
    const home = await tmpHome();
    const serve = await startServe(home, ['--store', cluster.url, '--max-stale', String(MAX_STALE_S)], {
      OB_PROXY_STORE_CATCHUP_MS: '200',
      OB_PROXY_USAGE_FLUSH_MS: '200',
    });
    nodes.push({
      serve,
      home,
      api: new DaemonClient(join(home, 'ob-proxy.sock')),
      pool: new Pool(serve.baseUrl, { connections: 2 }),
    });
  }
}, 60_000);

afterAll(async () => {
  for (const n of nodes) {
    await n.api.close().catch(() => {});
    await n.pool.close().catch(() => {});
    await n.serve.stop();
  }
  await sim?.stop();
  await cluster?.destroy();
}, 60_000);

async function get(
  n: Node,
  path: string,
  secret?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const res = await n.pool.request({
    method: 'GET',
    path,
    headers: secret === undefined ? {} : { authorization: `Bearer ${secret}` },
  });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

it(
  'kill -9 of PostgreSQL: serve from memory, refuse after --max-stale, catch up when it returns',
  { timeout: 120_000 },
  async () => {
    const [a, b] = nodes as [Node, Node];
    await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
    const good = (await a.api.ready('gpu-1', { wait: true })).defaultKey!.secret!;
    const early = await b.api.createKey('gpu-1', 'revoked-before-crash');
    const late = await b.api.createKey('gpu-1', 'revoked-during-outage');
    for (const n of nodes) {
      await eventually(
        async () => (await get(n, '/v1/models', late.secret)).status === 200,
        'every node knows the keys',
      );
    }
    // The last change before the crash: a revocation, committed; then the database dies at once.
    await a.api.revokeKey(early.id);
    await cluster.kill9();

    // Within --max-stale: the known key is served by both.
    for (const n of nodes) expect((await get(n, '/v1/models', good)).status).toBe(200);
    // Management changes fail with one line and exit 1.
    const refused = await runCli(['keys', 'create', '--instance', 'gpu-1', '--name', 'during-outage'], {
      home: a.home,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/could not be written.*PostgreSQL/);
    // A revocation during the outage takes effect on this node at once, and is written later.
    const revoking = await runCli(['keys', 'revoke', late.id], { home: b.home });
    expect(revoking.code).toBe(1);
    expect((await get(b, '/v1/models', late.secret)).status).toBe(401);

    // After --max-stale: every key refused, with Retry-After, /readyz 503, and a log line.
    for (const n of nodes) {
      const r = await eventually(
        async () => {
          const res = await get(n, '/v1/models', good);
          return res.status === 503 ? res : undefined;
        },
        'a refusal once stale',
        15_000,
      );
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'store_unreachable' } });
      expect(r.headers['retry-after']).toBeDefined();
      expect((await get(n, '/readyz')).status).toBe(503);
      // The stdout pipe lags the HTTP answer: the line is waited for.
      await eventually(
        () => n.serve.logs().some((l) => String(l.msg).includes('store_unreachable')),
        'the store_unreachable line',
      );
    }

    await cluster.start();
    // Back in sync: the good key works again everywhere; the revocation committed just before the
    // crash and the one made during the outage are refused everywhere.
    for (const n of nodes) {
      await eventually(async () => (await get(n, '/readyz')).status === 200, 'ready again', 30_000);
      await eventually(async () => (await get(n, '/v1/models', good)).status === 200, 'serving again', 30_000);
      expect((await get(n, '/v1/models', early.secret)).status).toBe(401);
      await eventually(
        async () => (await get(n, '/v1/models', late.secret)).status === 401,
        'the outage revocation reaches every node',
        30_000,
      );
    }
    // Management works again.
    const again = await runCli(['keys', 'create', '--instance', 'gpu-1', '--name', 'after', '--json'], {
      home: b.home,
    });
    expect(again.code).toBe(0);
  },
);
