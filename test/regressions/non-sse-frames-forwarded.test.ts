/**
 * Regression: frames that were not `data:` events (`event:`, `retry:`, `id:`,
 * comments, an HTML page with blank lines) were forwarded to the client as they came, though
 * docs/reliability.md said no garbage was. The policy now: only `data:` events reach the client,
 * as in OpenAI's wire format; comments and the `id:`/`retry:` fields are dropped; `event:
 * message` is an ordinary event and `event: error` an error event; any other event name, or a
 * line that is not SSE, ends the stream with one upstream_error event.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { expectedTokens, sseFrames, streamTokens } from '../reliability/harness.js';
import { type HostilePair, alongside, ask, errorEvents, startHostilePair } from '../helpers/hostile-upstream.js';

const notSse = obError('upstream_error', {
  message: 'The model server sent data that is not an OpenAI event stream; the stream was ended.',
}).toBody();

it('the relay drops comments and id/retry fields, and refuses what is not SSE', () => {
  const relay = new SseRelay('chatcmpl-x', false);
  const out = relay.push(
    Buffer.from(
      ': ping\n\nretry: 10\n\nid: 7\nevent: message\ndata: {"id":"a","choices":[]}\n\n: c\r\ndata: {"id":"b","choices":[]}\r\n\r\n',
    ),
  );
  expect(out).toBe('data: {"id":"chatcmpl-x","choices":[]}\n\ndata: {"id":"chatcmpl-x","choices":[]}\n\n');
  for (const bad of [
    '<html>',
    'event: telemetry\ndata: {}',
    'data: {"id":"a","choices":[]}\nfoo: bar',
    'hello world',
  ]) {
    const r = new SseRelay('chatcmpl-x', false);
    expect(r.push(Buffer.from(`${bad}\n\ndata: [DONE]\n\n`))).toBe('');
    expect({ bad, invalid: r.invalid, reason: r.invalidReason }).toEqual({ bad, invalid: true, reason: 'not_sse' });
  }
});

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair();
});
afterAll(async () => {
  await p.stop();
});

it('comments, retry, id and `event: message`: the data events alone reach the client, whole', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=sse-fields]]', true));
  expect(r.status).toBe(200);
  const frames = sseFrames(r.text);
  expect(frames.every((f) => f.startsWith('data: ') && !f.includes('\n'))).toBe(true);
  expect(streamTokens(frames)).toEqual(expectedTokens(4));
  expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
});

it('an HTML page: one upstream_error event and nothing of the page', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=html-frames]]', true));
  expect(r.status).toBe(200);
  expect(r.text).toBe(`data: ${JSON.stringify(notSse)}\n\n`);
});

it('an unknown event name: the chunks before it, then one upstream_error event, no [DONE]', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=named-event failAfterChunks=2]]', true));
  expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
  expect(errorEvents(r.text)).toEqual([notSse]);
  expect(r.text).not.toContain('telemetry');
  expect(r.text).not.toContain('[DONE]');
});
