/**
 * Regression (stream fast path): a learned event layout kept a copy of every
 * byte of the event it was learned from but its holes, up to the frame cap (1 MiB by default).
 * Layouts live as long as the daemon (four per model server, for up to 10,000 servers), so a
 * model server's few events with large fixed parts (a big `system_fingerprint`, logprobs, or a
 * hostile server's filler) pinned megabytes per instance for good. A layout now keeps at most
 * MAX_LAYOUT_BYTES (4 KiB) besides its holes; an event with more is relayed by the slow path,
 * with the same bytes, and its token string may still be of any size.
 */
import { expect, it } from 'vitest';
import { EventLayouts, MAX_LAYOUT_BYTES } from '../../src/wire/event-layouts.js';
import { SseRelay } from '../../src/wire/sse-relay.js';

const event = (fixed: string, token: string): string =>
  `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"${fixed}","choices":[{"index":0,"delta":{"content":"${token}"},"finish_reason":null}]}\n\n`;

it('events with 256 KiB of fixed bytes are relayed as the slow path does, and no layout keeps them', () => {
  const shapes = new EventLayouts();
  const fast = new SseRelay('ours', false, shapes);
  const slow = new SseRelay('ours', false, null);
  // Four distinct large events, each twice (the second would match the layout the first taught).
  const bytes = Buffer.from(
    ['a', 'b', 'c', 'd']
      .flatMap((f) => [event(f.repeat(256 * 1024), 't1'), event(f.repeat(256 * 1024), 't2')])
      .join(''),
  );
  expect(fast.push(bytes)).toBe(slow.push(bytes));
  expect(fast.contentChunks).toBe(8);
  expect(shapes.bytes).toBeLessThanOrEqual(4 * MAX_LAYOUT_BYTES);
});

it('a large token string still takes the fast path: only the fixed bytes count', () => {
  const shapes = new EventLayouts();
  const relay = new SseRelay('ours', false, shapes);
  const big = 'x'.repeat(512 * 1024);
  const out = relay.push(Buffer.from(event('fp', big) + event('fp', big) + event('fp', 'y')));
  expect(out).toBe((event('fp', big) + event('fp', big) + event('fp', 'y')).replaceAll('"id":"up"', '"id":"ours"'));
  expect(relay.slowEvents).toBe(1);
  expect(shapes.size).toBe(1);
  expect(shapes.bytes).toBeLessThanOrEqual(MAX_LAYOUT_BYTES);
});
