/**
 * Regression (client faults): when a streaming client stopped reading, the relay waited
 * for 'drain'; if the client then went away, 'drain' never came and the handler hung for ever:
 * its usage was never counted, its log line never written, and its closure leaked.
 */
import { connect } from 'node:net';
import { expect, it } from 'vitest';
import type { KeyRecord } from '../../src/domain/key.js';
import { chatBody, eventually, setupReadyInstance, untilHeldBack } from '../reliability/harness.js';

const env = setupReadyInstance({ id: 'stuck' });

function keyRecord(): KeyRecord {
  return [...env.h.daemon.ctx.lifecycle.registry.keys.values()][0] as KeyRecord;
}

it('a client that stops reading and then disconnects: upstream aborted, usage counted, handler finished', async () => {
  const before = { ...keyRecord().usage };
  const url = new URL(env.h.baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  const body = JSON.stringify(chatBody('tag-stuck [[sim chunks=200000]]', { stream: true }));
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${env.key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.pause(); // read nothing: the proxy's writes back up
  const up = await eventually(
    () => env.sim.requests.find((r) => JSON.stringify(r.body).includes('tag-stuck')),
    'upstream request',
  );
  // The simulator stops sending once the proxy stops reading: wait for its count to settle.
  await untilHeldBack(up);
  expect(up.chunksSent).toBeLessThan(200_000);
  socket.destroy();
  await eventually(() => (up.endedAt !== null && up.aborted ? true : undefined), 'upstream aborted');
  // The handler ran to its end: it counted the tokens relayed and wrote its log line.
  await eventually(() => keyRecord().usage.completionTokens > before.completionTokens, 'usage counted');
  await eventually(
    () => env.h.logs.some((l) => l.msg === 'chat completion' && l.stream === true),
    'handler finished and logged',
  );
  expect(keyRecord().usage.requests).toBe(before.requests + 1);
});
