/**
 * Regression (hostile model server): a model server, or a gateway in front
 * of it, that echoes the request's `Authorization` header in an error ("invalid token: Bearer
 * sk-…") handed the operator's upstream token (`--upstream-token-file`) to the client: an error
 * status's message and code are passed on, and an error event is forwarded as sent. Any client
 * of the instance, a key revoked since included, could then call the model server directly. The
 * token is now cleared from what is passed on from an error: the message, the code, the event
 * (its data on one line or several, the token escaped or not), and our own event for `event:
 * error`; a plain-text body is cleared before it is cut to 500 characters.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { upstreamStatusError } from '../../src/upstream/upstream-errors.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type Harness, MODEL, chatBody, eventually, post, startHarness } from '../reliability/harness.js';

const TOKEN = 'sk-operator-Up/stream+token=42';
const content = `{"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`;
const ev = (data: string): string => `data: ${data}\n\n`;

/** Each answer echoes the Authorization header the model server received. */
const ANSWERS: Record<string, (auth: string) => { status?: number; body: string }> = {
  status: (auth) => ({
    status: 401,
    body: JSON.stringify({ error: { message: `invalid token in header ${auth}`, code: `bad:${auth}` } }),
  }),
  statusText: (auth) => ({ status: 403, body: `forbidden: ${auth}` }),
  event: (auth) => ({ body: ev(content) + ev(JSON.stringify({ error: { message: `unauthorized: ${auth}` } })) }),
  escaped: (auth) => ({
    body: ev(content) + ev(`{"error":{"message":"unauthorized: ${auth.replaceAll('/', '\\/')}"}}`),
  }),
  multiLine: (auth) => ({
    body: `${ev(content)}event: error\ndata: {"error":{"message":\ndata: "unauthorized: ${auth}"}}\n\n`,
  }),
  named: (auth) => ({ body: `${ev(content)}event: error\ndata: {"message":"unauthorized: ${auth}","code":"x"}\n\n` }),
};

let h: Harness;
let up: RawUpstream;
let key: string;
const received: string[] = [];
beforeAll(async () => {
  up = await startRawUpstream(({ stream, content: which, headers }) => {
    const auth = String(headers.authorization);
    received.push(auth);
    const a = (ANSWERS[which] as (auth: string) => { status?: number; body: string })(auth);
    return {
      status: a.status ?? 200,
      headers: {
        'content-type':
          a.status === undefined
            ? stream
              ? 'text/event-stream'
              : 'application/json'
            : which === 'statusText'
              ? 'text/plain'
              : 'application/json',
      },
      body: a.body,
    };
  });
  h = await startHarness();
  const tokenFile = join(h.home, 'upstream.token');
  await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  const lc = h.daemon.ctx.lifecycle;
  await h.daemon.ctx.upstreamTokens.prepare(tokenFile);
  await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: up.url, upstreamTokenFile: tokenFile });
  const { defaultKey } = await lc.ready('gpu-1');
  const k = await defaultKey;
  key = lc.claimSecret(k!.id) as string;
  await eventually(() => h.daemon.ctx.upstreamTokens.get('gpu-1') === TOKEN, 'the upstream token loaded');
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

it('an error status that echoes the token: passed on without it', async () => {
  const r = await post(h.baseUrl, key, chatBody('status'));
  expect(received.at(-1)).toBe(`Bearer ${TOKEN}`);
  expect({ status: r.status, json: r.json }).toEqual({
    status: 401,
    json: obError('upstream_error', {
      status: 401,
      wireCode: 'bad:Bearer [upstream token]',
      message: 'Model server error (HTTP 401): invalid token in header Bearer [upstream token]',
    }).toBody(),
  });
  const text = await post(h.baseUrl, key, chatBody('statusText'));
  expect({ status: text.status, message: (text.json as { error: { message: string } }).error.message }).toEqual({
    status: 403,
    message: 'Model server error (HTTP 403): forbidden: Bearer [upstream token]',
  });
});

it.each(['event', 'escaped', 'multiLine'])(
  'an error event that echoes the token (%s): our error event, without it',
  async (which) => {
    const r = await post(h.baseUrl, key, chatBody(which, { stream: true }));
    expect(r.status).toBe(200);
    expect(r.text).not.toContain('operator');
    expect(
      r.text.endsWith(
        `data: ${JSON.stringify(
          obError('upstream_error', { message: 'Model server error: unauthorized: Bearer [upstream token]' }).toBody(),
        )}\n\n`,
      ),
    ).toBe(true);
  },
);

it('event: error without an error member: our event, without the token', async () => {
  const r = await post(h.baseUrl, key, chatBody('named', { stream: true }));
  expect(r.text).not.toContain('operator');
  expect(
    r.text.endsWith(
      `data: ${JSON.stringify(
        obError('upstream_error', {
          message: 'Model server error: unauthorized: Bearer [upstream token]',
          wireCode: 'x',
        }).toBody(),
      )}\n\n`,
    ),
  ).toBe(true);
});

it('a plain-text error body cut at 500 characters never keeps part of the token', () => {
  const e = upstreamStatusError(500, 'text/plain', `${'x'.repeat(490)}Bearer ${TOKEN}`, TOKEN);
  expect(e.message).toBe(`Model server error (HTTP 500): ${'x'.repeat(490)}Bearer [up`);
});
