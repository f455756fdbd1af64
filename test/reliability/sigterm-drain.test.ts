/**
 * Graceful stop: SIGTERM with 100 streams in flight. Every stream finishes whole
 * (all tokens, in order, then [DONE]) within the grace period, new requests are refused, and the
 * daemon exits 0. When the grace period runs out first, what is left is cut and it still exits 0.
 */
import { Pool } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { cliJson, startServe } from '../helpers/processes.js';
import { MODEL, eventually, expectedTokens, sseFrames, startSim, streamTokens, tmpHome } from './harness.js';

let sim: Simulator;
let simUrl: string;

beforeAll(async () => {
  const s = await startSim();
  sim = s.sim;
  simUrl = s.url;
});
afterAll(() => sim.close());

async function readyServe(grace: string): Promise<{ serve: Awaited<ReturnType<typeof startServe>>; key: string }> {
  const home = await tmpHome();
  const serve = await startServe(home, ['--grace', grace]);
  await cliJson(['instances', 'add', 'drain', '--model', MODEL, '--endpoint', simUrl], home);
  const ready = await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', 'drain'], home);
  return { serve, key: ready.defaultKey.secret };
}

function openStreams(
  pool: Pool,
  key: string,
  n: number,
  directive: string,
): { done: Promise<{ status: number; text: string }[]>; firstChunks: () => number } {
  let first = 0;
  const done = Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await pool.request({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: MODEL,
          stream: true,
          messages: [{ role: 'user', content: `s${i} ${directive}` }],
        }),
      });
      let text = '';
      let seen = false;
      try {
        for await (const chunk of r.body) {
          text += (chunk as Buffer).toString('utf8');
          if (!seen && text.includes('"content"')) {
            seen = true;
            first++;
          }
        }
      } catch {
        // cut by the daemon: what arrived is checked by the caller
      }
      return { status: r.statusCode, text };
    }),
  );
  return { done, firstChunks: () => first };
}

it('SIGTERM with 100 streams in flight: all finish whole within the grace period, then exit 0', async () => {
  const { serve, key } = await readyServe('20');
  const pool = new Pool(serve.baseUrl, { connections: 110 });
  // 20 tokens at 10/s: each stream lasts about two seconds after SIGTERM arrives.
  const streams = openStreams(pool, key, 100, '[[sim tokensPerSecond=10 chunks=20]]');
  await eventually(() => streams.firstChunks() === 100, '100 streams under way', 20_000);
  const signalledAt = Date.now();
  serve.proc.kill('SIGTERM');
  // New work is refused while the old finishes (503, or the listener is already closed).
  await eventually(
    () => serve.logs().some((l) => l.msg === 'draining: no new requests, in-flight ones may finish'),
    'draining',
  );
  const late = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'late' }] }),
  }).then(
    (r) => r.status,
    () => 'refused',
  );
  expect([503, 'refused']).toContain(late);
  const results = await streams.done;
  const code = await serve.exited;
  const drainMs = Date.now() - signalledAt;
  for (const r of results) {
    expect(r.status).toBe(200);
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(20));
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  }
  expect(code).toBe(0);
  expect(serve.logs().some((l) => l.msg === 'grace period over: closing remaining connections')).toBe(false);
  expect(serve.logs().at(-1)?.msg).toBe('stopped');
  console.log(JSON.stringify({ suite: 'sigterm-drain', streams: 100, drainMs }));
  await pool.close();
}, 60_000);

it('when the grace period runs out, remaining streams are cut and the daemon still exits 0', async () => {
  const { serve, key } = await readyServe('1');
  const pool = new Pool(serve.baseUrl, { connections: 20 });
  const streams = openStreams(pool, key, 10, '[[sim tokensPerSecond=2 chunks=1000]]');
  await eventually(() => streams.firstChunks() === 10, '10 long streams under way', 20_000);
  serve.proc.kill('SIGTERM');
  const results = await streams.done;
  expect(await serve.exited).toBe(0);
  for (const r of results) expect(r.text).not.toContain('[DONE]');
  expect(serve.logs().some((l) => l.msg === 'grace period over: closing remaining connections')).toBe(true);
  // The upstream requests of the cut streams were cancelled too, not left generating.
  await eventually(() => sim.stats.inFlight === 0, 'no upstream request left running', 10_000);
  await pool.destroy();
}, 60_000);
