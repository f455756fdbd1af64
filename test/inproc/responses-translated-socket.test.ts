/**
 * POST /v1/responses translated to chat completions (a simulator without /v1/responses), over
 * real sockets to a daemon in process listening on 127.0.0.1:0, with metrics on: a client that
 * leaves mid-stream cancels the upstream request and is counted as a disconnect, and every
 * answer is counted under route="responses", whichever way it went upstream.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let sim: Simulator;
let key: string;

beforeAll(async () => {
  d = await buildInproc({ metricsPort: 0, metricsHost: '127.0.0.1' });
  await d.daemon.listen();
  let url: string;
  ({ sim, url } = await startSim({ responses: false }));
  expect((await d.manage('POST', '/v1/instances', { id: 'old', model: MODEL, endpoint: url })).status).toBe(201);
  const ready = await d.manage('POST', '/v1/instances/old/ready', { probe: false });
  key = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

async function post(body: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${d.daemon.ctx.baseUrl}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

it('a client that leaves mid-stream cancels the translated upstream request', async () => {
  // The first request teaches the proxy that the server lacks the route.
  expect((await post({ model: MODEL, input: 'Say hello' })).status).toBe(200);
  const req = request(`${d.daemon.ctx.baseUrl}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  });
  const firstEvents = new Promise<string>((done, fail) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => {
        text += s;
        if (text.includes('response.output_text.delta')) done(text);
      });
    });
    req.on('error', fail);
  });
  req.end(JSON.stringify({ model: MODEL, input: 'Say hello [[sim tokensPerSecond=20 chunks=400]]', stream: true }));
  const text = await firstEvents;
  expect(text.startsWith('event: response.created\ndata: {')).toBe(true);
  req.destroy();
  const upstream = await sim.waitFor((r) => r.path === '/v1/chat/completions' && r.aborted);
  expect(upstream.chunksSent).toBeLessThan(400);
  type Listed = { usage: Record<string, unknown> }[];
  await expect
    .poll(async () => ((await d.manage('GET', '/v1/keys?instance=old')).json as Listed)[0]!.usage.disconnects)
    .toBe(1);
  expect(sim.requests.filter((r) => r.method === 'POST').map((r) => r.path)).toEqual([
    '/v1/responses',
    '/v1/chat/completions',
    '/v1/chat/completions',
  ]);
});

it('translated answers are counted under route="responses"', async () => {
  expect((await post({ model: MODEL, input: 'Say hello' })).status).toBe(200);
  const scraped = await (d.daemon.ctx.metrics as { scrape(): Promise<string> }).scrape();
  const lines = scraped.split('\n').filter((l) => l.startsWith('ob_proxy_requests_total{'));
  // The learning one and this one; a stream its client left is answered to no one.
  expect(lines.filter((l) => l.includes('route="responses"'))).toEqual([
    expect.stringMatching(/^ob_proxy_requests_total\{instance="old",key="k\w+",code="200",route="responses"\} 2$/),
  ]);
  expect(lines.filter((l) => !l.includes('route="responses"'))).toEqual([]);
});
