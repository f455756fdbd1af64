/**
 * Regression (what reaches the model server means what was checked): a body the proxy
 * must rewrite (a `developer` turn, `max_completion_tokens`, a stream's `stream_options`) was
 * sent upstream as JSON.stringify wrote it, with every number as JavaScript holds it: a seed of
 * 9007199254740993 arrived as 9007199254740992, and 1e400 in a field passed through as null.
 * Now a rewritten body keeps each number as the client wrote it; only the rewritten fields change.
 */
import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, MODEL, post, readyInstance, startHarness } from '../reliability/harness.js';

let h: Harness;
let key: string;
const received: string[] = [];
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received.push(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1,
        model: MODEL,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
  });
});

beforeAll(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  h = await startHarness();
  key = await readyInstance(h, 'gpu-1', `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
afterAll(async () => {
  await h.stop();
  server.closeAllConnections();
  server.close();
});

/** Sends `text` as the body, byte for byte; returns what the model server received. */
async function relay(text: string): Promise<string> {
  const before = received.length;
  const r = await post(h.baseUrl, key, text);
  expect(r.status).toBe(200);
  expect(received.length).toBe(before + 1);
  return received.at(-1) as string;
}

it('a developer turn: the role becomes system, and every number goes as written', async () => {
  const sent = await relay(
    `{"model":"${MODEL}","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"}],` +
      `"seed":9007199254740993,"temperature":0.10000000000000001,"x_vendor":{"big":1e400,"neg":-0,"f":1.50},"logit_bias":{"50256":-100}}`,
  );
  expect(sent).toBe(
    `{"model":"${MODEL}","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],` +
      `"seed":9007199254740993,"temperature":0.10000000000000001,"x_vendor":{"big":1e400,"neg":-0,"f":1.50},"logit_bias":{"50256":-100}}`,
  );
});

it('max_completion_tokens carried as max_tokens: the seed and the cap as written', async () => {
  const sent = await relay(
    `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":64,"seed":18446744073709551615}`,
  );
  expect(sent).toBe(
    `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"seed":18446744073709551615,"max_tokens":64}`,
  );
});

it('a client\'s "__proto__" key goes upstream as a key, not lost', async () => {
  const sent = await relay(
    `{"model":"${MODEL}","messages":[{"role":"developer","content":"x"}],"x_vendor":{"__proto__":{"a":1}}}`,
  );
  expect(sent).toBe(
    `{"model":"${MODEL}","messages":[{"role":"system","content":"x"}],"x_vendor":{"__proto__":{"a":1}}}`,
  );
});
