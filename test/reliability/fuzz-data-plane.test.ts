/**
 * Bad input on the data plane: property-based fuzzing (fast-check) of headers and bodies against
 * the running daemon. Whatever a client sends, the proxy never answers 5xx for the client's
 * mistake, never crashes, and answers every error in the OpenAI shape.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import {
  type Harness,
  MODEL,
  errorShape,
  parseOrNull,
  post,
  readyInstance,
  startHarness,
  startSim,
} from './harness.js';

let h: Harness;
let sim: Simulator;
let key: string;
let agent: Agent;
const seen = new Map<number, number>();

beforeAll(async () => {
  // No upstream wait can turn a client's mistake into a 504 here: the simulator answers at once.
  h = await startHarness({ badKeyLimit: 0, bodyLimit: 256 * 1024 });
  const s = await startSim({ chunks: 2 });
  sim = s.sim;
  key = await readyInstance(h, 'fuzz', s.url);
  agent = new Agent({ connections: 8 });
});

afterAll(async () => {
  console.log(JSON.stringify({ suite: 'fuzz', statuses: Object.fromEntries([...seen].sort()) }));
  await agent.close();
  await h.stop();
  await sim.close();
});

function count(status: number): void {
  seen.set(status, (seen.get(status) ?? 0) + 1);
}

/** The proxy's own answer to a request: never 5xx, errors always in the OpenAI shape. */
function checkAnswer(status: number, contentType: string | undefined, text: string): void {
  count(status);
  expect(status, text).toBeLessThan(500);
  if (status >= 400) {
    expect(contentType ?? '').toMatch(/^application\/json/);
    expect(errorShape(parseOrNull(text)), text).toBe(true);
  }
}

async function healthy(): Promise<void> {
  const r = await post(h.baseUrl, key, { model: MODEL, messages: [{ role: 'user', content: 'alive?' }] }, {}, agent);
  expect(r.status).toBe(200);
}

// Values a client might put in a chat request, right or wrong.
const anyValue = fc.oneof(
  fc.jsonValue(),
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.double(),
  fc.integer(),
  fc.constant(null),
  fc.constantFrom(
    -1,
    0,
    1,
    2,
    2.0001,
    1e308,
    -0,
    Number.MAX_SAFE_INTEGER + 2,
    'user',
    'system',
    'tool',
    'developer',
    MODEL,
    true,
  ),
);
const message = fc.record({ role: anyValue, content: anyValue }, { requiredKeys: [] });
const chatLike = fc.record(
  {
    model: fc.oneof(fc.constant(MODEL), anyValue),
    messages: fc.oneof(
      fc.array(message, { maxLength: 4 }),
      fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant'), content: fc.string() }), {
        minLength: 1,
        maxLength: 3,
      }),
      anyValue,
    ),
    temperature: anyValue,
    top_p: anyValue,
    max_tokens: anyValue,
    stream: anyValue,
    stream_options: anyValue,
    n: anyValue,
    tools: anyValue,
    extra: anyValue,
  },
  { requiredKeys: [] },
);

describe('data plane bodies', () => {
  it('chat-like JSON, valid or not: never 5xx, errors in the OpenAI shape', async () => {
    await fc.assert(
      fc.asyncProperty(chatLike, async (body) => {
        const r = await post(h.baseUrl, key, body, {}, agent);
        checkAnswer(r.status, r.headers['content-type'] as string | undefined, r.text);
      }),
      { numRuns: 300 },
    );
    await healthy();
  });

  it('any JSON value and any bytes as the body', async () => {
    const bytes = fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v) ?? 'null'),
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.uint8Array({ maxLength: 512 }).map((a) => Buffer.from(a)),
      fc.constantFrom(
        '',
        '{',
        '{"model":',
        '[]',
        '""',
        '{"model":"gemma4:26b","messages":[{"role":"user","content":"\\ud800"}]}',
        '\uFEFF{}',
        '{"__proto__":{"x":1}}',
        'null',
      ),
    );
    await fc.assert(
      fc.asyncProperty(bytes, async (body) => {
        const r = await post(h.baseUrl, key, body, {}, agent);
        checkAnswer(r.status, r.headers['content-type'] as string | undefined, r.text);
      }),
      { numRuns: 200 },
    );
    await healthy();
  });
});

describe('data plane headers', () => {
  // Anything a header value may legally carry on the wire (visible ASCII, space, tab, Latin-1).
  const headerText = fc.string({
    unit: fc
      .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0xa0, max: 0xff }))
      .map((c) => String.fromCharCode(c)),
    maxLength: 120,
  });

  it('Authorization and Content-Type of every shape', async () => {
    const auth = fc.oneof(
      headerText,
      headerText.map((s) => `Bearer ${s}`),
      fc.constantFrom(
        'Bearer',
        'Bearer ',
        'bearer  ',
        `Bearer ${'ob_sk_'.padEnd(60, 'A')}`,
        `Basic ${Buffer.from('a:b').toString('base64')}`,
      ),
      fc.constant(undefined),
    );
    const ctype = fc.oneof(
      headerText,
      fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
      ),
      fc.constant(undefined),
    );
    await fc.assert(
      fc.asyncProperty(auth, ctype, fc.boolean(), async (a, ct, withKey) => {
        const headers: Record<string, string> = {};
        if (ct !== undefined) headers['content-type'] = ct;
        headers.authorization = withKey ? `Bearer ${key}` : (a ?? '');
        if (!withKey && a === undefined) delete headers.authorization;
        const r = await post(
          h.baseUrl,
          null,
          { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
          headers,
          agent,
        );
        checkAnswer(r.status, r.headers['content-type'] as string | undefined, r.text);
      }),
      { numRuns: 300 },
    );
    await healthy();
  });

  it('raw request heads, including ones that are not valid HTTP', async () => {
    let answered = 0;
    const token = fc.string({
      unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEF0123456789-_'.split('')),
      minLength: 1,
      maxLength: 20,
    });
    const anyByte = fc.string({
      unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)),
      maxLength: 80,
    });
    const head = fc.record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'POST', 'BREW', ''),
      path: fc.oneof(
        fc.constantFrom(
          '/v1/chat/completions',
          '/v1/models',
          '/healthz',
          '/',
          '/v1/chat/completions?x=1',
          '//v1/chat/completions',
          '/v1/../v1/chat/completions',
          '*',
          '/%00',
          '/v1/chat/completions#x',
        ),
        anyByte.map((s) => `/${s}`),
      ),
      version: fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1', 'http/1.1', ''),
      headers: fc.array(fc.tuple(fc.oneof(token, anyByte), anyByte), { maxLength: 5 }),
      auth: fc.boolean(),
      body: fc.oneof(fc.constant(''), anyByte),
      lengthDelta: fc.constantFrom(0, 0, 0, -1, 1, 1_000_000),
    });
    await fc.assert(
      fc.asyncProperty(head, async (q) => {
        const lines = [`${q.method} ${q.path} ${q.version}`, 'Host: fuzz'];
        if (q.auth) lines.push(`Authorization: Bearer ${key}`);
        for (const [n, v] of q.headers) lines.push(`${n}: ${v}`);
        lines.push(
          `Content-Length: ${Math.max(0, Buffer.byteLength(q.body, 'latin1') + q.lengthDelta)}`,
          'Connection: close',
        );
        const raw = Buffer.from(`${lines.join('\r\n')}\r\n\r\n${q.body}`, 'latin1');
        const text = await rawExchange(raw);
        if (text === '') return; // the proxy may close a connection it cannot parse at all
        answered++;
        const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(text)?.[1]);
        expect(Number.isInteger(status), text.slice(0, 200)).toBe(true);
        const split = text.indexOf('\r\n\r\n');
        const ct = /\r\ncontent-type: ([^\r]*)/i.exec(text.slice(0, split))?.[1];
        const body = text.slice(split + 4);
        checkAnswer(status, ct, /transfer-encoding: chunked/i.test(text.slice(0, split)) ? dechunk(body) : body);
      }),
      { numRuns: 250 },
    );
    expect(answered).toBeGreaterThan(200);
    await healthy();
  });
});

/** Sends bytes on a fresh connection; resolves with all bytes back once the proxy closes or stops. */
function rawExchange(raw: Buffer): Promise<string> {
  const url = new URL(h.baseUrl);
  return new Promise((resolve) => {
    const s = connect(Number(url.port), url.hostname);
    let out = '';
    const timer = setTimeout(() => s.destroy(), 3_000);
    s.setEncoding('latin1').on('data', (d: string) => {
      out += d;
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    s.on('connect', () => s.end(raw));
  });
}

function dechunk(body: string): string {
  let out = '';
  let rest = body;
  for (;;) {
    const at = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, at), 16);
    if (!Number.isFinite(size) || size === 0) return out;
    out += rest.slice(at + 2, at + 2 + size);
    rest = rest.slice(at + 2 + size + 2);
  }
}
