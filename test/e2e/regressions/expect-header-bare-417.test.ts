/**
 * Regression (operators' mistakes): `Expect: 999-x` was answered by Node itself with a
 * bare 417 (no body, connection kept), which no OpenAI SDK can read. Siblings found with it, where
 * Node answered the public port outside our envelope: CONNECT closed the socket without a word, an
 * HTTP/1.1 request without Host got a bare 400, and bytes sent after a request whose stream had
 * begun made the parser-error handler write a status line into the middle of that stream.
 * `Expect: 100-continue` must keep working, with a client that waits for the 100.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../../src/errors.js';
import type { Simulator } from '../../../simulator/simulator.js';
import { type Harness, MODEL, chatBody, readyInstance, startHarness, startSim } from '../../reliability/harness.js';

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

/** Writes `bytes`, then reads until the server closes the connection. */
function raw(bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.setEncoding('latin1').on('data', (d: string) => {
      out += d;
    });
    s.on('error', () => {});
    s.on('close', () => resolve(out));
    s.on('connect', () => s.write(bytes));
  });
}

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

function parsed(text: string): RawReply {
  const head = text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n');
  const headers = Object.fromEntries(
    head.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return {
    status: Number(head[0]!.slice(9, 12)),
    headers,
    body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as unknown,
  };
}

const body = JSON.stringify(chatBody('hello'));

it('Expect: 999-x gets 417 expectation_failed in the OpenAI shape, and the connection is closed', async () => {
  // Raw, and the body held back, as a client waiting for the server's go-ahead does; the read
  // ending at all shows the server closed the connection.
  const reply = parsed(
    await raw(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 999-x\r\n\r\n`,
    ),
  );
  expect(reply.status).toBe(417);
  expect(reply.body).toEqual(obError('expectation_failed').toBody());
  expect(reply.headers).toMatchObject({
    'content-type': 'application/json',
    connection: 'close',
    'x-request-id': expect.stringMatching(/^req_/),
  });
  expect(obError('expectation_failed').message).toMatch(/100-continue.*Send the request without/);
});

it('an unknown expectation is refused on every route, GET included', async () => {
  const reply = parsed(await raw('GET /v1/models HTTP/1.1\r\nHost: x\r\nExpect: 999-x\r\n\r\n'));
  expect(reply).toMatchObject({ status: 417, body: obError('expectation_failed').toBody() });
});

it('Expect: 100-continue still works: the client gets 100 Continue, sends the body, gets the completion', async () => {
  const result = await new Promise<{ continued: boolean; status: number; text: string }>((resolve, reject) => {
    let continued = false;
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          expect: '100-continue',
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ continued, status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    // Node's client sends the body only when told to, as curl and SDK transports do.
    req.on('continue', () => {
      continued = true;
      req.end(body);
    });
  });
  expect(result.continued).toBe(true);
  expect(result.status).toBe(200);
  expect(JSON.parse(result.text)).toMatchObject({ object: 'chat.completion', model: MODEL });
});

it('curl with a large body sends Expect: 100-continue by itself, waits for the 100, and gets the completion', async () => {
  const file = join(h.home, 'big.json');
  await writeFile(file, JSON.stringify(chatBody('x'.repeat(2_000_000))));
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    const child = execFile(
      'curl',
      [
        '-sS',
        '-v',
        `${h.baseUrl}/v1/chat/completions`,
        '-H',
        '@-',
        '-H',
        'Content-Type: application/json',
        '--data-binary',
        `@${file}`,
      ],
      { timeout: 20_000, maxBuffer: 10_000_000 },
      (err, so, se) =>
        err === null ? resolve({ stdout: so, stderr: se }) : reject(new Error(`${err.message}\n${se}`)),
    );
    // The key header on stdin, so it is in no argument list.
    child.stdin!.end(`Authorization: Bearer ${key}\n`);
  });
  expect(stderr).toMatch(/> Expect: 100-continue/i);
  expect(stderr).toMatch(/< HTTP\/1\.1 100 Continue/);
  expect(stderr).toMatch(/< HTTP\/1\.1 200 OK/);
  expect(JSON.parse(stdout)).toMatchObject({ object: 'chat.completion', model: MODEL });
});

it('CONNECT gets 404 route_not_found in the OpenAI shape instead of a closed socket', async () => {
  const reply = parsed(await raw('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
  expect(reply.status).toBe(404);
  expect(reply.body).toMatchObject({
    error: {
      code: 'route_not_found',
      type: 'not_found_error',
      param: null,
      message: expect.stringMatching(/not a forward proxy/),
    },
  });
});

it('an HTTP/1.1 request without Host gets 400 malformed_http in the OpenAI shape; HTTP/1.0 needs none', async () => {
  const reply = parsed(await raw(`GET /v1/models HTTP/1.1\r\nAuthorization: Bearer ${key}\r\n\r\n`));
  expect(reply.status).toBe(400);
  expect(reply.body).toMatchObject({
    error: {
      code: 'malformed_http',
      type: 'invalid_request_error',
      param: null,
      message: expect.stringMatching(/Host header/),
    },
  });
  const old = parsed(await raw(`GET /v1/models HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`));
  expect(old).toMatchObject({ status: 200, body: { object: 'list', data: [{ id: MODEL }] } });
});

it('bytes that are not HTTP, sent while a stream is being answered, never write a status line into it', async () => {
  // Paced, so the stream is still being answered when the bytes arrive.
  sim.configure({ chunks: 40, tokensPerSecond: 20 });
  const stream = JSON.stringify(chatBody('count', { stream: true }));
  const out = await new Promise<string>((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    let sent = false;
    s.setEncoding('latin1').on('data', (d: string) => {
      text += d;
      // Once the first event has arrived, the response has begun.
      if (!sent && text.includes('data: {')) {
        sent = true;
        s.write('GARBAGE\r\n\r\n');
      }
    });
    s.on('error', () => {});
    s.on('close', () => resolve(text));
    s.on('connect', () =>
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(stream)}\r\n\r\n${stream}`,
      ),
    );
  });
  expect(out.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true);
  expect(out.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200']);
  expect(out).not.toContain('malformed_http');
});
