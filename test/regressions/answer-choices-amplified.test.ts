/**
 * Regression (hostile model server): a plain answer's `choices` had no bound
 * but the answer's byte cap, and every entry was filled in to the shape of docs/contract.md §3.3. A 4 MB answer
 * of two million `0`s reached the client as 165 MB (41 times the bytes, five times the 32 MiB
 * cap on an answer) after seconds of the event loop; one of 16 million within the cap took 14 s
 * and 2 GB of heap, then failed re-encoding as "upstream_unavailable". A request asks for one
 * choice (`n` must be 1), so an answer with more than MAX_CHOICES (128, OpenAI's own limit on
 * `n`) is now not a chat completion: 502 upstream_error, whether its shape needed filling in or
 * not. Up to 128 are relayed as before.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { MAX_CHOICES } from '../../src/wire/chat-response.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type Harness, MODEL, chatBody, post, readyInstance, startHarness } from '../reliability/harness.js';

const full = '{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}';
const answer = (choices: string, idFirst = true): string =>
  idFirst
    ? `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[${choices}]}`
    : `{"object":"chat.completion","id":"up","created":1,"model":"${MODEL}","choices":[${choices}]}`;
const many = (n: number, choice: string): string => Array.from({ length: n }, () => choice).join(',');

/** The answers, by the request's content. */
const ANSWERS: Record<string, string> = {
  zeros: answer(many(2_000_000, '0')),
  empties: answer(many(MAX_CHOICES + 1, '{}'), false),
  fullOver: answer(many(MAX_CHOICES + 1, full)),
  fullAtCap: answer(many(MAX_CHOICES, full)),
  emptiesAtCap: answer(many(MAX_CHOICES, '{}'), false),
};

let h: Harness;
let up: RawUpstream;
let key: string;
beforeAll(async () => {
  up = await startRawUpstream(({ content }) => ({ body: ANSWERS[content] ?? '' }));
  h = await startHarness();
  key = await readyInstance(h, 'gpu-1', up.url);
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

const notACompletion = obError('upstream_error', {
  message: "The model server sent an answer that is not a chat completion. Check the instance's endpoint.",
}).toBody();

it.each(['zeros', 'empties', 'fullOver'])('%s: more than 128 choices is 502 upstream_error', async (which) => {
  const r = await post(h.baseUrl, key, chatBody(which));
  expect({ status: r.status, json: r.json, bytes: r.text.length }).toEqual({
    status: 502,
    json: notACompletion,
    bytes: JSON.stringify(notACompletion).length,
  });
});

it('128 choices are relayed: as sent with our id, or filled in to the shape of docs/contract.md §3.3', async () => {
  const sent = await post(h.baseUrl, key, chatBody('fullAtCap'));
  expect(sent.status).toBe(200);
  const id = (sent.json as { id: string }).id;
  expect(sent.text).toBe(ANSWERS.fullAtCap!.replace('"id":"up"', `"id":"${id}"`));

  const filled = await post(h.baseUrl, key, chatBody('emptiesAtCap'));
  expect(filled.status).toBe(200);
  const body = filled.json as { choices: unknown[] };
  expect(body.choices).toHaveLength(MAX_CHOICES);
  expect(body.choices[MAX_CHOICES - 1]).toEqual({
    index: MAX_CHOICES - 1,
    message: { role: 'assistant', content: '' },
    finish_reason: null,
  });
});
