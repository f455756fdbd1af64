/**
 * Regression (layout poisoning): a model server's learned event layouts are
 * four, shared by all its streams, and a stream kept to the fast path only while the layout of
 * its events stayed among them. A stream whose every event has a layout of its own (a client
 * asking for `logprobs`: each token and its logprob are fixed bytes, not a hole) replaced all
 * four at every event, so every other key's stream on that server, finding its layout gone by
 * its next event, took the slow path (decode, parse, encode: about four times the CPU) for
 * every event. A stream now makes its own layout from the event the slow path learned from, and
 * keeps it: after its first event it no longer needs the shared set.
 */
import { expect, it } from 'vitest';
import { EventLayouts } from '../../src/wire/event-layouts.js';
import { SseRelay } from '../../src/wire/sse-relay.js';

const event = (id: string, token: string, logprobs: boolean): string =>
  `data: {"id":"${id}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${token}"},"logprobs":${
    logprobs ? `{"content":[{"token":"${token}","logprob":-0.${token.length},"top_logprobs":[]}]}` : 'null'
  },"finish_reason":null}]}\n\n`;

it('a stream keeps the fast path while another stream of its server asks for logprobs', () => {
  const shapes = new EventLayouts();
  const withLogprobs = new SseRelay('chatcmpl-a', false, shapes);
  const plain = new SseRelay('chatcmpl-b', false, shapes);
  const plainSlow = new SseRelay('chatcmpl-b', false, null);
  let out = '';
  let expected = '';
  // Interleaved, as the streams of one server are: four logprobs events between two plain ones.
  for (let i = 0; i < 50; i++) {
    for (let k = 0; k < 4; k++) withLogprobs.push(Buffer.from(event('up-a', `w${i}x${k}`, true)));
    const bytes = Buffer.from(event('up-b', `t${i}`, false));
    out += plain.push(bytes);
    expected += plainSlow.push(bytes);
  }
  expect(out).toBe(expected);
  expect(plain.contentChunks).toBe(50);
  // Only its first event is parsed.
  expect(plain.slowEvents).toBe(1);
});
