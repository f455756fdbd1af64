/**
 * Regression (fuzzing): requests that Node's parser or Fastify's router refused before
 * our handlers ran were answered in Fastify's own shape (`{"error":"Bad Request","statusCode":400}`)
 * which OpenAI SDKs cannot read, and the management API answered a too-long id with a bare 414
 * that the CLI reported as "internal_error". Both now answer in our envelope with a sentence.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { DaemonClient } from '../../cli/daemon-client.js';
import { type Harness, startHarness } from '../reliability/harness.js';

let h: Harness;
let client: DaemonClient;
beforeAll(async () => {
  h = await startHarness();
  client = new DaemonClient(h.config.socket);
});
afterAll(async () => {
  await client.close();
  await h.stop();
});

function raw(bytes: string): Promise<string> {
  const url = new URL(h.baseUrl);
  return new Promise((resolve) => {
    const s = connect(Number(url.port), url.hostname);
    let out = '';
    s.setEncoding('latin1').on('data', (d: string) => {
      out += d;
    });
    s.on('error', () => {});
    s.on('close', () => resolve(out));
    s.on('connect', () => s.end(bytes));
  });
}

function parsed(text: string): { status: number; body: unknown } {
  return { status: Number(text.slice(9, 12)), body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as unknown };
}

it('a malformed request head gets 400 malformed_http in the OpenAI shape', async () => {
  expect(parsed(await raw('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n'))).toEqual({
    status: 400,
    body: obError('malformed_http').toBody(),
  });
  expect(parsed(await raw('GARBAGE\r\n\r\n'))).toEqual({ status: 400, body: obError('malformed_http').toBody() });
});

it('headers too large get 431 headers_too_large in the OpenAI shape', async () => {
  const text = await raw(`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
  expect(parsed(text)).toEqual({ status: 431, body: obError('headers_too_large').toBody() });
});

it('a management id too long for the router is a clear invalid_argument', async () => {
  const err = await client.revokeKey('a'.repeat(5000)).then(
    () => null,
    (e: unknown) => e as { code: string; message: string },
  );
  expect(err).toMatchObject({
    code: 'invalid_argument',
    message: 'An id in the path is too long: instance ids are at most 64 characters.',
  });
});
