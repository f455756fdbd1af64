/**
 * Regression (stream fast path): a model server writing its events as
 * `data:{…}` (no space after the colon, as SSE allows) had its first event parsed by the slow
 * path and sent as `data: {…}`, and every later event of the layout that first one taught
 * copied by the fast path with the server's own `data:{` head. The fast path's promise is the
 * slow path's bytes; a client reading `data: ` lines (the OpenAI wire format, and many hand-made
 * clients) could not parse the copied events. The client now gets `data: {"id":"<ours>…` for
 * every event, whichever head the server wrote, on either path.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { EventLayouts } from '../../src/wire/event-layouts.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type Harness, MODEL, chatBody, post, readyInstance, startHarness } from '../reliability/harness.js';

const event = (id: string, delta: string, finish = 'null', head = 'data:'): string =>
  `${head}{"id":"${id}","object":"chat.completion.chunk","created":1763870000,"model":"${MODEL}","choices":[{"index":0,"delta":${delta},"finish_reason":${finish}}]}\n\n`;
const tokens = ['Hel', 'lo', ' wor', 'ld'];
const upstream = (id: string, head: string): string =>
  [
    ...tokens.map((t) => event(id, `{"role":"assistant","content":"${t}"}`, 'null', head)),
    event(id, '{}', '"stop"', head),
    `${head} [DONE]\n\n`.replace('data: ', 'data:'),
  ].join('');

it('the fast path sends `data: ` before every event, as the slow path does, for a server writing `data:`', () => {
  const shapes = new EventLayouts();
  const fast = new SseRelay('chatcmpl-ours', false, shapes);
  const slow = new SseRelay('chatcmpl-ours', false, null);
  const bytes = Buffer.from(upstream('up-1', 'data:'));
  const fastOut = fast.push(bytes);
  expect(fast.slowEvents).toBeLessThan(5);
  expect(fastOut).toBe(slow.push(bytes));
  expect(fastOut).toBe(upstream('chatcmpl-ours', 'data: ').replace('data:[DONE]', 'data: [DONE]'));
  // A second stream of that server, its layouts learned, all on the fast path.
  const next = new SseRelay('chatcmpl-next', false, shapes);
  expect(next.push(Buffer.from(upstream('up-2', 'data:')))).toBe(
    upstream('chatcmpl-next', 'data: ').replace('data:[DONE]', 'data: [DONE]'),
  );
  // Only `data:[DONE]`, which is not `data: [DONE]` byte for byte, is parsed.
  expect(next.slowEvents).toBe(1);
});

let h: Harness;
let up: RawUpstream;
let key: string;
beforeAll(async () => {
  up = await startRawUpstream(() => ({ body: upstream('chatcmpl-up', 'data:') }));
  h = await startHarness();
  key = await readyInstance(h, 'gpu-1', up.url);
});
afterAll(async () => {
  await h.stop();
  await up.close();
});

it('through the daemon: every event of such a server reaches the client as `data: {…}`, stream after stream', async () => {
  for (let i = 0; i < 2; i++) {
    const r = await post(h.baseUrl, key, chatBody('hi', { stream: true }));
    expect(r.status).toBe(200);
    const id = /"id":"([^"]+)"/.exec(r.text)?.[1] as string;
    expect(id).toMatch(/^chatcmpl-/);
    expect(r.text).toBe(upstream(id, 'data: ').replace('data:[DONE]', 'data: [DONE]'));
  }
});
