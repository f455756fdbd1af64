/**
 * Regression (client faults): the data plane set Fastify's requestTimeout (120 s), but
 * Node reads that limit only when the server is created, so it never took effect: a client that
 * sent its request slowly held its connection for Node's default 300 s. Now the limit is given to
 * the server at creation, checked often, and answered with an OpenAI-shaped 408.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { type Harness, startHarness } from '../reliability/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ requestTimeoutMs: 800 });
});
afterAll(() => h.stop());

it('the server is created with the configured request time-out', () => {
  expect(h.daemon.dataPlane.server.requestTimeout).toBe(800);
});

it('a request whose headers never finish is answered 408 in the OpenAI shape and closed', async () => {
  const url = new URL(h.baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  let text = '';
  socket.setEncoding('utf8').on('data', (s: string) => {
    text += s;
  });
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bea');
  await new Promise((r) => socket.once('close', r));
  expect(text.startsWith('HTTP/1.1 408 ')).toBe(true);
  expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual(obError('request_timeout').toBody());
});
