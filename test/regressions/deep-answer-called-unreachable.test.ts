/**
 * Regression (hostile model server): an answer or an event that had to be
 * encoded again (its id not first, a usage chunk the client did not ask for, data on several
 * lines, a plain answer whose shape needed filling in) and nested a few thousand levels deep made
 * JSON.stringify overflow the stack. The RangeError, thrown inside undici's callback, was taken
 * for a network failure: the client got 502 (or an error event) `upstream_unavailable`, "could
 * not be reached or closed the connection. Retry", and the log and metrics blamed the network.
 * Such an answer is now refused for what it is: 502 `upstream_error` "nested too deeply to
 * relay" (one such event mid-stream, the upstream request aborted).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import {
  type Harness,
  MODEL,
  chatBody,
  eventually,
  post,
  readyInstance,
  sseFrames,
  startHarness,
} from '../reliability/harness.js';

const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
const content = `{"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`;
const ev = (data: string): string => `data: ${data}\n\n`;

/** The answers, by the request's content; each stream sends a content event first. */
const ANSWERS: Record<string, string> = {
  plain: `{"object":"chat.completion","id":"up","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"x":${deep}}`,
  idNotFirst: ev(content) + ev(`{"object":"chat.completion.chunk","id":"up","choices":[],"x":${deep}}`) + ev('[DONE]'),
  usageUnasked:
    ev(content) +
    ev(
      `{"id":"up","choices":[{"index":0,"delta":{"content":"!"}}],"usage":{"prompt_tokens":1,"completion_tokens":1},"x":${deep}}`,
    ) +
    ev('[DONE]'),
  multiLine: `${ev(content)}data: {"id":"up","choices":[],\ndata: "x":${deep}}\n\n${ev('[DONE]')}`,
  errorWithCr: `${ev(content)}data: {"error":{"message":"boom"},\r"x":${deep}}\n\n`,
};

let h: Harness;
let up: RawUpstream;
let key: string;
beforeAll(async () => {
  up = await startRawUpstream(({ content: which }) => ({ body: ANSWERS[which] ?? '' }));
  h = await startHarness();
  key = await readyInstance(h, 'gpu-1', up.url);
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

/** The codes the daemon logged for the model server's failures so far. */
const failureCodes = (): unknown[] => h.logs.filter((l) => l.msg === 'model server failed').map((l) => l.code);

it('a plain answer too deep to encode again: 502 upstream_error, said as such', async () => {
  const r = await post(h.baseUrl, key, chatBody('plain'));
  expect({ status: r.status, json: r.json }).toEqual({
    status: 502,
    json: obError('upstream_error', {
      message: "The model server's answer is nested too deeply to relay; it was not relayed.",
    }).toBody(),
  });
  expect(failureCodes().at(-1)).toBe('upstream_error');
});

it.each(['idNotFirst', 'usageUnasked', 'multiLine'])(
  'a stream event too deep to encode again (%s): one upstream_error event, no [DONE]',
  async (which) => {
    const before = failureCodes().length;
    const r = await post(h.baseUrl, key, chatBody(which, { stream: true }));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    expect(frames).toEqual([
      `data: ${content.replace('"id":"up"', `"id":"${(JSON.parse(frames[0]!.slice(6)) as { id: string }).id}"`)}`,
      `data: ${JSON.stringify(
        obError('upstream_error', {
          message: 'The model server sent an event nested too deeply to relay; the stream was ended.',
        }).toBody(),
      )}`,
    ]);
    await eventually(() => failureCodes().length > before, 'the failure logged');
    expect(failureCodes().slice(before)).toEqual(['upstream_error']);
  },
);

it('an error event too deep to encode again: our error event with its message, the rest dropped', async () => {
  const before = failureCodes().length;
  const r = await post(h.baseUrl, key, chatBody('errorWithCr', { stream: true }));
  expect(r.status).toBe(200);
  const frames = sseFrames(r.text);
  expect(frames).toEqual([
    `data: ${content.replace('"id":"up"', `"id":"${(JSON.parse(frames[0]!.slice(6)) as { id: string }).id}"`)}`,
    `data: ${JSON.stringify(obError('upstream_error', { message: 'Model server error: boom' }).toBody())}`,
  ]);
  await eventually(() => failureCodes().length > before, 'the failure logged');
  expect(failureCodes().slice(before)).toEqual(['upstream_error']);
});
