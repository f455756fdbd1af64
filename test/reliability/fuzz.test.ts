/**
 * Bad input: property-based fuzzing (fast-check) of headers and bodies against the
 * running daemon. Whatever a client sends, the proxy never answers 5xx for the client's mistake,
 * never crashes, and answers every error in the OpenAI shape. Then the management API and the
 * CLI with ids, names and dates that are empty, huge, control characters, unicode, path-like.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { runCli } from '../helpers/processes.js';
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
let client: DaemonClient;
const seen = new Map<number, number>();

beforeAll(async () => {
  // No upstream wait can turn a client's mistake into a 504 here: the simulator answers at once.
  h = await startHarness({ badKeyLimit: 0, bodyLimit: 256 * 1024 });
  const s = await startSim({ chunks: 2 });
  sim = s.sim;
  key = await readyInstance(h, 'fuzz', s.url);
  agent = new Agent({ connections: 8 });
  client = new DaemonClient(h.config.socket);
});

afterAll(async () => {
  console.log(JSON.stringify({ suite: 'fuzz', statuses: Object.fromEntries([...seen].sort()) }));
  await agent.close();
  await client.close();
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

describe('management API: ids, names and dates', () => {
  const bad = [
    '',
    ' ',
    'a'.repeat(65),
    'a'.repeat(100_000),
    'x\u0000y',
    'x\ny',
    '\u001b[31mred',
    'ü',
    '日本',
    '🔑',
    '../etc/passwd',
    'a/b',
    '..',
    '.hidden',
    '-rf',
    'a b',
    'a\\b',
    '%2e%2e',
  ];

  async function refused(p: Promise<unknown>, param: string): Promise<string> {
    const err = await p.then(
      () => null,
      (e: unknown) => e as { code?: string; param?: string | null; message: string; status?: number },
    );
    expect(err, 'refused').not.toBeNull();
    expect({ code: err?.code, param: err?.param }).toEqual({ code: 'invalid_argument', param });
    expect(err?.message.length).toBeLessThan(300); // a sentence, not an echo of a huge input
    return err?.message ?? '';
  }

  it('instance ids that are empty, huge, control, unicode or path-like are refused, and nothing is added', async () => {
    const before = (await client.listInstances()).length;
    for (const id of bad) await refused(client.addInstance({ id, model: MODEL }), 'id');
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'binary', maxLength: 80 }).filter((s) => !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/.test(s)),
        async (id) => {
          await refused(client.addInstance({ id, model: MODEL }), 'id');
        },
      ),
      { numRuns: 100 },
    );
    for (const id of [42, null, true, ['a'], { a: 1 }])
      await refused(client.call('POST', '/v1/instances', { id, model: MODEL }), 'id');
    expect((await client.listInstances()).length).toBe(before);
  });

  it('path-like ids in URLs find nothing and touch nothing', async () => {
    for (const id of ['..', '../fuzz', '%2e%2e', 'fuzz/../fuzz', 'fuzz%00', 'a'.repeat(5000)]) {
      for (const action of ['stop', 'fail', 'terminate', 'pending', 'ready'] as const) {
        const err = await client.call('POST', `/v1/instances/${encodeURIComponent(id)}/${action}`, {}).then(
          () => null,
          (e: unknown) => e as { code: string },
        );
        expect(['instance_not_found', 'invalid_argument']).toContain(err?.code);
      }
      const keyErr = await client.revokeKey(id).then(
        () => null,
        (e: unknown) => e as { code: string },
      );
      expect(['key_not_found', 'invalid_argument']).toContain(keyErr?.code);
    }
    expect((await client.getInstance('fuzz')).state).toBe('ready');
  });

  it('key names: empty, huge, control or invisible characters are refused; ordinary unicode is kept', async () => {
    for (const name of [
      '',
      '   ',
      'a'.repeat(65),
      'a'.repeat(100_000),
      'x\u0000',
      'x\ny',
      '\u001b[2J',
      'evil\u202egnp.exe',
      'zero\u200bwidth',
      'x\u2028y',
    ]) {
      await refused(client.createKey('fuzz', name), 'name');
    }
    for (const name of [42, null, ['a'], { a: 1 }])
      await refused(client.call('POST', '/v1/keys', { instance: 'fuzz', name }), 'name');
    for (const name of ['clé 🔑', '日本語のキー', '../../etc/passwd', 'a/b\\c']) {
      const k = await client.createKey('fuzz', name);
      expect(k.name).toBe(name);
    }
  });

  it('dates: anything but an ISO 8601 time with a zone, in the future, is refused', async () => {
    await client.addInstance({ id: 'dated', model: MODEL });
    for (const packEndsAt of [
      '',
      'tomorrow',
      '2030-01-01',
      '2030-13-01T00:00:00Z',
      '2030-01-01T00:00:00',
      '1999-01-01T00:00:00Z',
      '+275760-09-13T00:00:00Z',
      '2030-01-01T00:00:00Z\n',
      'a'.repeat(10_000),
      '2030-02-30T00:00:00Z',
    ]) {
      const err = await client.extend('dated', packEndsAt).then(
        () => null,
        (e: unknown) => e as { code: string; param: string },
      );
      expect({ v: packEndsAt.slice(0, 40), code: err?.code, param: err?.param }).toEqual({
        v: packEndsAt.slice(0, 40),
        code: 'invalid_argument',
        param: 'packEndsAt',
      });
    }
    for (const packEndsAt of [42, null, {}])
      await refused(client.call('POST', '/v1/instances/dated/extend', { packEndsAt }), 'packEndsAt');
    expect((await client.getInstance('dated')).packEndsAt).toBeNull();
  });
});

describe('the CLI refuses bad input with one clear line', () => {
  it('exit 1 (refused) or 2 (a bad date: usage) and one stderr line for each bad id, name and date', async () => {
    const home = h.home;
    const cases: [string[], RegExp, number][] = [
      [['instances', 'add', '../x', '--model', MODEL], /Instance id must be/, 1],
      [['instances', 'add', 'a'.repeat(300), '--model', MODEL], /Instance id must be/, 1],
      [['instances', 'add', 'é', '--model', MODEL], /Instance id must be/, 1],
      [['keys', 'create', '--instance', 'fuzz', '--name', 'x\u001b[2Jy'], /control or invisible/, 1],
      [['keys', 'create', '--instance', 'fuzz', '--name', ''], /must not be empty|required/, 1],
      [['instances', 'extend', 'fuzz', '--pack-ends', 'next week'], /--pack-ends must be an ISO 8601/, 2],
    ];
    for (const [args, message, code] of cases) {
      const r = await runCli([...args, '--socket', h.config.socket], { home });
      expect({ args: args.join(' ').slice(0, 60), code: r.code, stdout: r.stdout }).toEqual({
        args: args.join(' ').slice(0, 60),
        code,
        stdout: '',
      });
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    }
  });
});
