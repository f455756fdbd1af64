/**
 * Guard: the wait between a model server's reads is the relay's to time now, not
 * undici's. While a streaming client does not read, the relay pauses the upstream, and the
 * model server, held back, goes quiet: that silence is the client's doing, and must not end the
 * stream with upstream_timeout (undici's body time-out did not count a paused read either).
 */
import { request } from 'node:http';
import { expect, it } from 'vitest';
import {
  chatBody,
  eventually,
  expectedTokens,
  setupReadyInstance,
  sseFrames,
  streamTokens,
  untilHeldBack,
} from '../reliability/harness.js';

const IDLE_MS = 1_000;
const CHUNKS = 60_000;
const env = setupReadyInstance({ id: 'slow-reader', config: { idleTimeoutMs: IDLE_MS } });

it('a client that stops reading for longer than the idle time still gets the whole stream', async () => {
  const url = new URL(env.h.baseUrl);
  const body = JSON.stringify(chatBody(`tag-slow [[sim chunks=${CHUNKS} tokensPerSecond=0]]`, { stream: true }));
  const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: Number(url.port),
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { authorization: `Bearer ${env.key}`, 'content-type': 'application/json' },
      },
      resolve,
    );
    req.on('error', reject);
    req.end(body);
  });
  res.pause(); // read nothing: the proxy's writes back up, and it pauses the model server
  expect(res.statusCode).toBe(200);
  const up = await eventually(
    () => env.sim.requests.find((r) => JSON.stringify(r.body).includes('tag-slow')),
    'upstream request',
  );
  await untilHeldBack(up);
  expect(up.chunksSent).toBeLessThan(CHUNKS);
  // Quiet for more than the idle time and the sweep's two periods (deadlines.ts), then read.
  await new Promise((r) => setTimeout(r, IDLE_MS + 1_000));
  expect(up.endedAt).toBeNull();
  res.setEncoding('utf8');
  let text = '';
  res.on('data', (s: string) => {
    text += s;
  });
  res.resume();
  await new Promise((r) => res.once('end', r));
  const frames = sseFrames(text);
  expect(frames.filter((f) => f.includes('"error"'))).toEqual([]);
  expect(streamTokens(frames)).toEqual(expectedTokens(CHUNKS));
  expect(frames.at(-1)).toBe('data: [DONE]');
}, 30_000);
