/**
 * Regression (a broken model server): a model server that answered in broken HTTP
 * (response headers over undici's 16 KiB, a chunk size that is not hex) was reported to the client as 502 upstream_unavailable, "could not be reached
 * or closed the connection. Retry": the SDKs retry that, and the operator looks at the network.
 * Now it is 502 upstream_error naming what was wrong, as for any answer the proxy refuses.
 */
import { once } from 'node:events';
import { type AddressInfo, type Server, type Socket, createServer } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import {
  type Harness,
  MODEL,
  chatBody,
  freshAgent,
  post,
  readyInstance,
  startHarness,
} from '../reliability/harness.js';

const MODELS = JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] });

/** What the raw server writes for the next chat completion. */
let next = '';
let server: Server;
let h: Harness;
let key: string;

beforeAll(async () => {
  server = createServer((socket: Socket) => {
    let head = '';
    socket.on('error', () => {});
    socket.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      if (head.startsWith('GET ')) {
        socket.end(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${MODELS.length}\r\nconnection: close\r\n\r\n${MODELS}`,
        );
      } else if (head.includes('"messages"')) {
        socket.end(next);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  h = await startHarness({ upstreamTimeoutMs: 5_000, idleTimeoutMs: 5_000 });
  key = await readyInstance(h, 'gpu-1', `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
afterAll(async () => {
  await h.stop();
  server.close();
});

const malformed = (what: string) =>
  obError('upstream_error', {
    message: `The model server sent a malformed HTTP response (${what}); it was not relayed. Check the instance's endpoint.`,
  }).toBody();

async function askWith(answer: string): Promise<{ status: number; json: unknown }> {
  next = answer;
  const agent = freshAgent();
  try {
    const r = await post(h.baseUrl, key, chatBody('hi'), {}, agent);
    return { status: r.status, json: r.json };
  } finally {
    await agent.close();
  }
}

it('response headers over 16 KiB: 502 upstream_error, not "could not be reached"', async () => {
  const r = await askWith(`HTTP/1.1 200 OK\r\nx-junk: ${'a'.repeat(20_000)}\r\ncontent-length: 2\r\n\r\n{}`);
  expect(r).toEqual({ status: 502, json: malformed('headers over 16 KiB') });
});

it('a chunk size that is not hex: 502 upstream_error', async () => {
  const r = await askWith(
    'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
  );
  expect(r).toEqual({ status: 502, json: malformed('not valid HTTP/1.1') });
});
