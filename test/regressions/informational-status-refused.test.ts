/**
 * Regression (hostile model server): an informational response before the
 * answer (103 Early Hints, as a reverse proxy in front of a model server may send; 102
 * Processing) was refused as the answer itself: 502 "The model server answered HTTP 103, which is
 * not a chat completion", and the valid answer behind it was lost. (docs/reliability.md said Node's
 * client waits for the final status; undici hands over every 1xx but 100.) Informational
 * responses are now skipped and the final one relayed; one that never ends meets the response
 * deadline, as any answer does.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { limitErrors } from '../../src/upstream/answer-limits.js';
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

const PLAIN = `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`;
const STREAM = `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n`;
const DEADLINE_MS = 1_500;

/** 102 Processing every 50 ms until the connection closes; never a final status. */
function processingForEver(res: ServerResponse): false {
  const timer = setInterval(() => res.writeProcessing(), 50);
  res.on('close', () => {
    clearInterval(timer);
    endlessClosed = true;
  });
  return false;
}
let endlessClosed = false;

const early: Record<string, (res: ServerResponse) => boolean | undefined> = {
  hints: (res) => {
    res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
    return undefined;
  },
  processing: (res) => {
    res.writeProcessing();
    res.writeEarlyHints({ link: '</a.js>; rel=preload; as=script' });
    return undefined;
  },
  endless: processingForEver,
};

let h: Harness;
let up: RawUpstream;
let key: string;
beforeAll(async () => {
  up = await startRawUpstream(({ stream, content }) => ({
    body: stream ? STREAM : PLAIN,
    ...(early[content] === undefined ? {} : { before: early[content] }),
  }));
  h = await startHarness({ responseDeadlineMs: DEADLINE_MS });
  key = await readyInstance(h, 'gpu-1', up.url);
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

it.each(['hints', 'processing'])('%s before the answer: the answer is relayed, plain and streaming', async (which) => {
  const plain = await post(h.baseUrl, key, chatBody(which));
  expect(plain.status).toBe(200);
  expect(plain.text).toBe(PLAIN.replace('"id":"up"', `"id":"${(plain.json as { id: string }).id}"`));
  const stream = await post(h.baseUrl, key, chatBody(which, { stream: true }));
  expect(stream.status).toBe(200);
  const id = (JSON.parse(sseFrames(stream.text)[0]!.slice(6)) as { id: string }).id;
  expect(stream.text).toBe(STREAM.replace('"id":"up"', `"id":"${id}"`));
});

it('informational responses without end: 502 at the response deadline, the upstream request aborted', async () => {
  const r = await post(h.baseUrl, key, chatBody('endless'));
  expect({ status: r.status, json: r.json }).toEqual({
    status: 502,
    json: limitErrors.tooSlow(DEADLINE_MS).toBody(),
  });
  await eventually(() => endlessClosed, 'the model server saw its connection closed');
});
