/**
 * What a refusal does to its connection (docs/reliability.md, "A refusal before the body"):
 * answered before the body has all arrived, it closes the connection, lingering so the client
 * reads the answer instead of a reset; answered once the body is in, or to a request without
 * one, it keeps the connection for the next request.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { hello } from '../helpers/chat.js';
import { type ServeProcess, type SimProcess } from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';
import { chatHead, openConnection } from '../helpers/raw-connection.js';

const MODEL = 'gemma4:26b';
const BODY_LIMIT = 4 * 1024 * 1024;
let sim: SimProcess;
let serve: ServeProcess;
let key: string;

beforeAll(async () => {
  ({ sim, serve, key } = await startDaemonAndSim({ serveArgs: ['--body-limit', String(BODY_LIMIT)] }));
}, 30_000);

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

/** What the SDK reported for each attempt: the status of the error it threw, or its class. */
async function outcomes(apiKey: string, content: string, n: number): Promise<string[]> {
  const client = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey, maxRetries: 0 });
  const seen: string[] = [];
  for (let i = 0; i < n; i++) {
    try {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }] });
      seen.push('answered');
    } catch (err) {
      const e = err as { status?: number; code?: string; constructor: { name: string } };
      seen.push(e.status === undefined ? e.constructor.name : `${e.status} ${e.code}`);
    }
  }
  return seen;
}

describe('a refused request whose body is still being sent', () => {
  // Several megabytes are still on their way when the refusal is written: closing at once,
  // with them unread, made the kernel reset the connection, and about half of these attempts
  // ended in a connection error (EPIPE) the SDK would have retried instead of the 401.
  it('an OpenAI SDK sending a large body with a bad key gets its 401 every time, not a connection error', async () => {
    // The key is checked first (docs/contract.md §3), so a body over the limit is refused for its key.
    expect(await outcomes('ob_sk_notakey', 'x'.repeat(2 * BODY_LIMIT), 10)).toEqual(
      Array(10).fill('401 invalid_api_key'),
    );
  }, 60_000);

  // It was already closed at once before the 413 was made to linger too.
  it('a body over --body-limit, refused from its Content-Length, gets its 413 every time', async () => {
    expect(await outcomes(key, 'x'.repeat(2 * BODY_LIMIT), 10)).toEqual(Array(10).fill('413 payload_too_large'));
  }, 60_000);
});

describe('a refusal that leaves nothing unread keeps the connection', () => {
  it('a request without a body (GET /v1/models with a bad key): the next request is answered on the same connection', async () => {
    const conn = await openConnection(serve.baseUrl);
    const host = new URL(serve.baseUrl).host;
    conn.write(`GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ob_sk_notakey\r\n\r\n`);
    const refused = await conn.answer();
    expect(refused.status).toBe(401);
    expect(refused.headers.connection).toBe('keep-alive');
    expect(JSON.parse(refused.body)).toEqual(obError('invalid_api_key').toBody());
    conn.write(`GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    const listed = await conn.answer();
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.body)).toEqual({
      object: 'list',
      data: [{ id: MODEL, object: 'model', created: expect.any(Number), owned_by: 'ob-proxy' }],
    });
    expect(conn.ended()).toBe(false);
    conn.close();
  });

  it('a refusal once the body is read (a valid key, invalid JSON): the next request is answered on the same connection', async () => {
    const conn = await openConnection(serve.baseUrl);
    const host = new URL(serve.baseUrl).host;
    conn.write(`${chatHead(host, key, 9)}{not json`);
    const refused = await conn.answer();
    expect(refused.status).toBe(400);
    expect(refused.headers.connection).toBe('keep-alive');
    expect(JSON.parse(refused.body)).toMatchObject({
      error: { type: 'invalid_request_error', code: 'invalid_json', param: null },
    });
    const body = JSON.stringify(hello(MODEL, { messages: [{ role: 'user', content: 'same connection' }] }));
    conn.write(chatHead(host, key, Buffer.byteLength(body)) + body);
    const answered = await conn.answer();
    expect(answered.status).toBe(200);
    expect(JSON.parse(answered.body)).toMatchObject({
      object: 'chat.completion',
      model: MODEL,
      choices: [{ message: { role: 'assistant' } }],
    });
    expect((await sim.requests()).filter((r) => JSON.stringify(r.body).includes('same connection'))).toHaveLength(1);
    conn.close();
  });
});
