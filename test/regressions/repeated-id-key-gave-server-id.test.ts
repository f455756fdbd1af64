/**
 * Regression (id splicing): our id is spliced over the text of the server's
 * first key, `{"id":"…"`, and the rest sent as it came. A chunk or an answer repeating the key
 * later (`…,"id":"up"}`, or spelled with an escape, `"\u0069d"`, which the plain answer's check
 * for a second `"id"` missed) reached the client with both, and JSON parsers (the proxy's, the
 * client's) take the last: the client read the server's id, not ours, and a stream's events
 * differed from the plain path's (normalizeCompletion) answer. Such an event or answer is now
 * encoded again with our id as its only one; a nested id (a tool call's) is still spliced over.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spliceCompletionId } from '../../src/wire/completion-splice.js';
import { normalizeCompletion } from '../../src/wire/chat-response.js';
import { EventLayouts } from '../../src/wire/event-layouts.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type Harness, MODEL, chatBody, post, readyInstance, startHarness } from '../reliability/harness.js';

const chunk = (t: string, extra: string): string =>
  `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"${t}"},"finish_reason":null}]${extra}}\n\n`;
const REPEATS = [',"id":"up"', ',"id":"other"', ',"\\u0069d":"up"', ',"i\\u0064":"up"'];

/** The ids the client reads, event by event. */
const ids = (text: string): unknown[] =>
  text
    .split('\n\n')
    .filter((f) => f.startsWith('data: {'))
    .map((f) => (JSON.parse(f.slice(6)) as { id: unknown }).id);

it('a stream event repeating `id` reaches the client with ours as its only id, on the fast and the slow path', () => {
  for (const repeat of REPEATS) {
    const bytes = Buffer.from(chunk('a', repeat) + chunk('b', repeat) + chunk('c', ''));
    const fast = new SseRelay('chatcmpl-ours', false, new EventLayouts());
    const slow = new SseRelay('chatcmpl-ours', false, null);
    const out = fast.push(bytes);
    expect(out).toBe(slow.push(bytes));
    expect({ repeat, ids: ids(out) }).toEqual({ repeat, ids: ['chatcmpl-ours', 'chatcmpl-ours', 'chatcmpl-ours'] });
  }
});

it('a tool call id nested in an event is no repeat: the event is spliced, as sent', () => {
  const event =
    'data: {"id":"up","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"f","arguments":"{\\"i\\u0064\\":1}"}}]}}]}\n\n';
  const relay = new SseRelay('chatcmpl-ours', false, null);
  expect(relay.push(Buffer.from(event))).toBe(event.replace('"id":"up"', '"id":"chatcmpl-ours"'));
});

const answer = (repeat: string): string =>
  `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]${repeat}}`;

it('a plain answer repeating `id` (escaped) is not spliced: normalizeCompletion gives it our id', () => {
  for (const repeat of REPEATS) {
    const text = answer(repeat);
    const parsed = JSON.parse(text) as unknown;
    const spliced = spliceCompletionId(Buffer.from(text), text, parsed, 'chatcmpl-ours');
    if (spliced !== null) {
      expect(JSON.parse(spliced.toString())).toEqual(normalizeCompletion(parsed, 'chatcmpl-ours', MODEL, 1));
    }
    expect({ repeat, id: (JSON.parse((spliced ?? Buffer.from('{}')).toString()) as { id?: unknown }).id }).not.toEqual({
      repeat,
      id: 'up',
    });
  }
});

let h: Harness;
let up: RawUpstream;
let key: string;
beforeAll(async () => {
  up = await startRawUpstream(({ stream, content }) => {
    const repeat = REPEATS[Number(content)] as string;
    return { body: stream ? chunk('a', repeat) + chunk('b', repeat) + 'data: [DONE]\n\n' : answer(repeat) };
  });
  h = await startHarness();
  key = await readyInstance(h, 'gpu-1', up.url);
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

it('through the daemon: the client reads our id, never the server`s, streamed or not', async () => {
  for (const [n, repeat] of REPEATS.entries()) {
    const plain = await post(h.baseUrl, key, chatBody(String(n)));
    expect(plain.status).toBe(200);
    const id = (plain.json as { id: string }).id;
    expect({ repeat, id }).toEqual({ repeat, id: expect.stringMatching(/^chatcmpl-/) as unknown });
    expect(plain.text).not.toContain('"up"');

    const streamed = await post(h.baseUrl, key, chatBody(String(n), { stream: true }));
    expect(streamed.status).toBe(200);
    const got = ids(streamed.text);
    expect({ repeat, got }).toEqual({ repeat, got: [got[0], got[0]] });
    expect(got[0]).toMatch(/^chatcmpl-/);
    expect(streamed.text).not.toContain('"up"');
    expect(streamed.text.endsWith('data: [DONE]\n\n')).toBe(true);
  }
});
