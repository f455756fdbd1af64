/**
 * Regression (hostile model server): a plain chat answer that was not a chat completion (JSON
 * of another shape) was refused with 502 but not counted as the model server's failure: no
 * "model server failed" log line, no `ob_proxy_upstream_errors_total`, no error on the trace,
 * where the same answer on /v1/responses, /v1/completions or /v1/messages was. Every route now
 * refuses it through one path, and says it as the model server's failure.
 */
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type Harness, MODEL, readyInstance, startHarness } from '../reliability/harness.js';

let h: Harness;
let up: RawUpstream;
let key: string;
beforeAll(async () => {
  // JSON, and an object, but of no API's shape.
  up = await startRawUpstream(() => ({ body: '{"hello":"world"}' }));
  h = await startHarness();
  key = await readyInstance(h, 'gpu-1', up.url);
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

const failures = (): number => h.logs.filter((l) => l.msg === 'model server failed').length;

it.each([
  ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, 'a chat completion'],
  ['/v1/responses', { input: 'hi' }, 'a Responses API response'],
  ['/v1/completions', { prompt: 'hi' }, 'a text completion'],
  ['/v1/messages', { max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, 'a Messages API message'],
] as const)(
  '%s: 502 upstream_error naming what was expected, and the model server failed',
  async (path, body, what) => {
    const before = failures();
    const answered = up.answered;
    const res = await request(`${h.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: MODEL, ...body }),
    });
    const json = (await res.body.json()) as Record<string, unknown>;
    expect(up.answered).toBe(answered + 1);
    const message = `The model server sent an answer that is not ${what}. Check the instance's endpoint.`;
    // Messages speaks Anthropic's error shape; the others OpenAI's.
    expect({ status: res.statusCode, json }).toEqual({
      status: 502,
      json:
        path === '/v1/messages'
          ? { type: 'error', error: { type: 'api_error', message, code: 'upstream_error' } }
          : obError('upstream_error', { message }).toBody(),
    });
    expect(failures()).toBe(before + 1);
    expect(h.logs.filter((l) => l.msg === 'model server failed').at(-1)).toMatchObject({ code: 'upstream_error' });
  },
);
