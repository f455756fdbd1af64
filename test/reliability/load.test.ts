/**
 * Load (the short version; `npm run soak` runs the long one): thousands of mixed
 * plain and streaming requests at high concurrency through the proxy to simulated instances,
 * with zero errors, zero lost or reordered chunks, and memory back near its start; then
 * hundreds of streams held open at once.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Harness, readyInstance, startHarness, startSim } from './harness.js';
import { holdStreams, memory, runLoad } from './load-runner.js';

let h: Harness;
const sims: Simulator[] = [];
const keys: string[] = [];

beforeAll(async () => {
  h = await startHarness({ logLevel: 'warn' });
  // Several instances, each its own model server: the proxy keeps one connection pool per server.
  for (let i = 0; i < 4; i++) {
    const s = await startSim({ recordLimit: 0 });
    sims.push(s.sim);
    keys.push(await readyInstance(h, `load-${i}`, s.url));
  }
});

afterAll(async () => {
  await h.stop();
  for (const s of sims) await s.close();
});

it('3,000 mixed requests at concurrency 64: no errors, no lost or reordered chunks, memory back', async () => {
  await runLoad({ baseUrl: h.baseUrl, keys, total: 300, concurrency: 32, streamShare: 0.5, chunks: 8 }); // warm-up
  const before = memory();
  const r = await runLoad({ baseUrl: h.baseUrl, keys, total: 3_000, concurrency: 64, streamShare: 0.5, chunks: 16 });
  const after = memory();
  console.log(JSON.stringify({ suite: 'load', ...r, before, after }));
  expect(r.firstErrors).toEqual([]);
  expect({ requests: r.requests, errors: r.errors, chunksLost: r.chunksLost, reordered: r.reordered }).toEqual({
    requests: 3_000,
    errors: 0,
    chunksLost: 0,
    reordered: 0,
  });
  expect(r.chunksExpected).toBe(3_000 * 16);
  // Nothing per request is kept: the heap returns to within a few MB of where it started.
  expect(after.heapUsedMb - before.heapUsedMb).toBeLessThan(15);
  // Every request was counted against its key (usage is kept in memory, flushed in batches).
  const requests = [...h.daemon.ctx.lifecycle.registry.keys.values()].reduce((n, k) => n + k.usage.requests, 0);
  expect(requests).toBe(3_300);
}, 120_000);

it('800 streams held open at once, all ending whole', async () => {
  // Each stream is held after its first chunk until all 800 have one; then 30 tokens at 30 a second.
  const r = await holdStreams(h.baseUrl, keys, 800, 30, 30, sims);
  console.log(JSON.stringify({ suite: 'load-held', ...r }));
  expect(r.firstErrors).toEqual([]);
  expect({ completed: r.completed, errors: r.errors }).toEqual({ completed: 800, errors: 0 });
  expect(r.peak).toBe(800);
}, 120_000);
