/**
 * Regression: an event holding a raw CR as JSON whitespace (`{"id":"a",\r"choices":…}`)
 * was forwarded with it, its id spliced into the text. JSON allows that CR, but SSE clients end a
 * line at a CR (the openai SDK's line decoder does), so the client got half an event and a parse
 * error. Such an event is now encoded again, without the whitespace, and never learned as a layout.
 */
import { expect, it } from 'vitest';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { EventLayouts } from '../../src/wire/event-layouts.js';

it('an event with a raw CR inside reaches the client as one line, and teaches the fast path nothing', () => {
  const shapes = new EventLayouts();
  const relay = new SseRelay('ours', false, shapes);
  const event = 'data: {"id":"up",\r"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n';
  const out = relay.push(Buffer.from(event + event));
  expect(out).toBe('data: {"id":"ours","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'.repeat(2));
  expect(out).not.toContain('\r');
  expect(shapes.size).toBe(0);
  expect(relay.slowEvents).toBe(2);
});

it('nor does an error event', () => {
  const relay = new SseRelay('ours', false);
  expect(relay.push(Buffer.from('data: {"error":\r{"message":"boom"}}\n\n'))).toBe(
    'data: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
  );
  expect(relay.sawError).toBe(true);
});
