/**
 * Regression: requests pipelined on one HTTP/1.1 connection were all started at once. Node
 * parses every request in what a client writes and hands each to the handler straight away,
 * holding the answers back to send them in order; a client that wrote 300 chat completions in
 * one packet and never read its answers had all 300 sent to the model server together, and every
 * answer (up to --max-answer-bytes each) waited in the daemon's memory for the client to read
 * the first: 300 answers of 690 KB took the daemon from 93 MB to 321 MB, and with large answers
 * one connection could exhaust the memory of the daemon that serves every key.
 *
 * Now the requests of a connection are served one after the other: a pipelined request waits,
 * unstarted, for the answer before it to end, and a connection with more than MAX_PIPELINED
 * waiting is closed. A client that pipelines a few requests and reads still gets every answer,
 * whole and in order.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MAX_PIPELINED } from '../../daemon/data-plane/connection-limits.js';
import type { Simulator } from '../../simulator/simulator.js';
import { hello } from '../helpers/chat.js';
import { chatRequests } from '../helpers/inproc.js';
import { eventually } from '../helpers/processes.js';
import { openConnection } from '../helpers/raw-connection.js';
import { type Harness, MODEL, readyInstance, startHarness, startSim } from '../reliability/harness.js';

let sim: Simulator;
let h: Harness;
let key: string;

beforeAll(async () => {
  // Answers of about 70 KB: a few fill the socket buffers of a client that never reads.
  const started = await startSim({ chunks: 10_000, tokensPerSecond: 0 });
  sim = started.sim;
  h = await startHarness();
  key = await readyInstance(h, 'one', started.url);
});

afterAll(async () => {
  await h?.stop();
  await sim?.close();
});

function chatRequest(content: string): string {
  const body = JSON.stringify({ ...hello(MODEL), messages: [{ role: 'user', content }] });
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

function upstreamChats(): { body: unknown; completed: boolean }[] {
  return chatRequests(sim);
}

it('a few pipelined requests are answered whole, in order, one after the other upstream', async () => {
  const before = upstreamChats().length;
  const conn = await openConnection(h.baseUrl);
  conn.write(['first', 'second', 'third'].map(chatRequest).join(''));
  for (let i = 0; i < 3; i++) {
    const answer = await conn.answer(10_000);
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as { object: string }).object).toBe('chat.completion');
  }
  conn.close();
  const got = upstreamChats().slice(before);
  expect(got.map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content)).toEqual([
    'first',
    'second',
    'third',
  ]);
  expect(got.every((r) => r.completed)).toBe(true);
});

it('a pipeline flood from a client that never reads starts one request upstream, and the connection is closed', async () => {
  const before = upstreamChats().length;
  const conn = await openConnection(h.baseUrl);
  conn.socket.pause();
  conn.write(chatRequest('flood').repeat(300));
  await eventually(() => conn.ended(), 'the flooding connection closed', 10_000);
  const started = upstreamChats().length - before;
  expect(started).toBeLessThanOrEqual(1);
  expect(300).toBeGreaterThan(MAX_PIPELINED + 1);
  // The daemon serves everyone else as before.
  const other = await openConnection(h.baseUrl);
  other.write(chatRequest('after'));
  expect((await other.answer(10_000)).status).toBe(200);
  other.close();
});
