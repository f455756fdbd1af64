/**
 * Regression: a daemon on a shared store that has not heard from it for `--max-stale` refuses every
 * key with 503 store_unreachable "rather than risk serving a key revoked elsewhere" (docs/contract.md §4),
 * but only when a request's headers arrived. A request whose headers came while it was in sync was
 * still sent upstream once stale: a body held back until then (Expect: 100-continue), and a
 * request waiting in its instance's queue when its turn came, were answered 200 by the model
 * server, with a key the daemon could no longer vouch for. The check made when the request is sent
 * upstream (the re-check of checks 2 to 5) now refuses them with 503 store_unreachable too, and
 * nothing reaches the model server.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { eventually } from '../../helpers/processes.js';
import { type Cluster, startCluster } from '../../helpers/postgres.js';
import { request } from 'undici';
import { obError } from '../../../src/errors.js';
import { holdBody } from '../../helpers/raw-http.js';
import { type Harness, MODEL, post, readyInstance, startHarness, startSim } from '../../reliability/harness.js';
import type { Simulator } from '../../../simulator/simulator.js';

let cluster: Cluster;
let h: Harness;
let sim: Simulator;
let key: string;
/** A second instance: its own admission slot, for a plain request pending upstream. */
let key2: string;

beforeAll(async () => {
  cluster = await startCluster();
  h = await startHarness({ store: cluster.url, maxStaleMs: 1_000, storeCatchupMs: 200, maxConcurrency: 1 });
  const started = await startSim();
  sim = started.sim;
  key = await readyInstance(h, 'gpu-1', started.url);
  key2 = await readyInstance(h, 'gpu-2', started.url);
}, 60_000);

afterAll(async () => {
  // The store is gone for good: the daemon stops without writing its last usage counts.
  await h?.stop().catch(() => {});
  await sim?.close();
  await cluster?.destroy();
}, 60_000);

// The whole body, as the daemon answers a key it cannot vouch for.
const STORE_UNREACHABLE = obError('store_unreachable').toBody();

function body(tag: string, extra = ''): string {
  return JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `${tag}${extra}` }] });
}

const seen = (tag: string): boolean => sim.requests.some((r) => JSON.stringify(r.body).includes(tag));

it(
  'out of reach of the store for --max-stale: a stream in flight ends, a queued request and a held body get 503, none reaches the model server',
  { timeout: 60_000 },
  async () => {
    // One request holds the instance's only slot, a second waits in its queue, a third holds its body.
    const first = await request(`${h.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        stream: true,
        messages: [{ role: 'user', content: 'first [[sim chunks=100000 tokensPerSecond=20]]' }],
      }),
    });
    expect(first.statusCode).toBe(200);
    let streamed = '';
    first.body.setEncoding('utf8').on('data', (d: string) => (streamed += d));
    let firstEnded = false;
    first.body.once('end', () => (firstEnded = true)).once('error', () => (firstEnded = true));
    const queued = post(h.baseUrl, key, body('tag-queued'));
    await eventually(() => h.daemon.ctx.admission?.depth('gpu-1') === 1, 'the second request queued');
    const held = await holdBody(h.baseUrl, key, body('tag-held'));
    // A plain answer the model server takes its time over: pending upstream when the store goes.
    const pending = post(h.baseUrl, key2, body('tag-pending', ' [[sim chunks=100000 tokensPerSecond=20]]'));
    await eventually(() => seen('tag-pending'), 'the plain request to reach the model server');

    await cluster.kill9();
    await eventually(() => h.daemon.ctx.storeStale, 'the daemon to count itself out of sync', 10_000);

    // The stream in flight ends with one error event and no [DONE]; that frees the instance's
    // slot, and the queued request's turn comes.
    await eventually(() => firstEnded, 'the stream in flight to end', 10_000);
    const events = streamed.split('\n\n').filter((f) => f !== '');
    expect(events.at(-1)).toMatch(/^data: \{"error"/);
    expect(JSON.parse((events.at(-1) as string).slice(6))).toEqual(STORE_UNREACHABLE);
    expect(streamed).not.toContain('[DONE]');
    const q = await queued;
    expect(q.status).toBe(503);
    expect(q.headers['retry-after']).toBe('5');
    expect(q.json).toEqual(STORE_UNREACHABLE);

    const late = await held.send();
    expect(late.status).toBe(503);
    expect(late.headers['retry-after']).toBe('5');
    expect(JSON.parse(late.body)).toEqual(STORE_UNREACHABLE);

    // The plain request pending upstream is answered 503 too, with the same Retry-After.
    const p = await pending;
    expect({ status: p.status, retryAfter: p.headers['retry-after'], json: p.json }).toEqual({
      status: 503,
      retryAfter: '5',
      json: STORE_UNREACHABLE,
    });

    expect(seen('tag-held')).toBe(false);
    expect(seen('tag-queued')).toBe(false);
  },
);
