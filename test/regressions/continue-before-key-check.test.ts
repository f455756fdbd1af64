/**
 * Regression (checked before the body): Node answered `Expect: 100-continue` with
 * 100 Continue as soon as the headers came, before the key was checked, so a client with a bad or
 * revoked key was told to upload its whole body (up to --body-limit) only to be refused after it.
 * Now the 100 is written by the auth hook once the key has passed; a refused request gets its
 * refusal and no 100, and its connection is closed without reading the body.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import type { Simulator } from '../../simulator/simulator.js';
import { type Harness, chatBody, readyInstance, startHarness, startSim } from '../reliability/harness.js';

let h: Harness;
let sim: Simulator;
let key: string;
let port: number;
beforeAll(async () => {
  h = await startHarness();
  const s = await startSim();
  sim = s.sim;
  key = await readyInstance(h, 'gpu-1', s.url);
  port = Number(new URL(h.baseUrl).port);
});
afterAll(async () => {
  await h.stop();
  await sim.close();
});

const body = JSON.stringify(chatBody('hello'));

/**
 * Sends the headers with Expect: 100-continue and holds the body back. Sends it only when a
 * 100 Continue arrives; returns all the server wrote until it closed or `stopAfter` was seen.
 */
function exchange(bearer: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    let sent = false;
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      out += d;
      if (!sent && out.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
        sent = true;
        s.write(body);
      }
      // A whole answer other than the 100: its head and the body its Content-Length announces.
      const rest = out.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
      const end = rest.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(rest.slice(0, end));
      if (end !== -1 && length !== null && rest.length - end - 4 >= Number(length[1])) s.end();
    });
    s.on('error', reject);
    s.on('close', () => resolve(out));
    s.on('connect', () =>
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${bearer}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`,
      ),
    );
  });
}

function answer(text: string): { status: number; body: unknown } {
  const end = text.indexOf('\r\n\r\n');
  return { status: Number(text.slice(9, 12)), body: JSON.parse(text.slice(end + 4)) as unknown };
}

it('a bad key gets its 401 and no 100 Continue: the body is never asked for', async () => {
  const before = sim.requests.length;
  const text = await exchange(`ob_sk_${'A'.repeat(12)}_${'b'.repeat(38)}`);
  expect(text.startsWith('HTTP/1.1 401 ')).toBe(true);
  expect(answer(text)).toEqual({ status: 401, body: obError('invalid_api_key').toBody() });
  expect(/\r\nconnection: close\r\n/i.test(text)).toBe(true);
  expect(sim.requests.length).toBe(before);
});

it('a revoked key gets 401 revoked_api_key and no 100 Continue', async () => {
  const lc = h.daemon.ctx.lifecycle;
  const created = await lc.createKey('gpu-1', 'soon revoked');
  await lc.revokeKey(created.key.id);
  const before = sim.requests.length;
  const text = await exchange(created.secret);
  expect(text.startsWith('HTTP/1.1 401 ')).toBe(true);
  expect(answer(text)).toEqual({ status: 401, body: obError('revoked_api_key').toBody() });
  expect(sim.requests.length).toBe(before);
});

it('a valid key gets 100 Continue, then its answer, and the model server the body as sent', async () => {
  const before = sim.requests.length;
  const text = await exchange(key);
  expect(text.startsWith('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n')).toBe(true);
  const reply = answer(text.slice('HTTP/1.1 100 Continue\r\n\r\n'.length));
  expect(reply.status).toBe(200);
  expect((reply.body as { object: string }).object).toBe('chat.completion');
  expect(sim.requests.length).toBe(before + 1);
  expect(sim.requests.at(-1)?.body).toEqual(JSON.parse(body));
});
