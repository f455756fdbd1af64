/**
 * Regression: an event starting `{"error"` was taken for an error event by its prefix
 * and forwarded unchecked, so `data: {"error" <not json>` reached the client, whose SDK then
 * threw a parse error. An error event must be valid JSON like any other; a broken one ends the
 * stream with one upstream_error event.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { expectedTokens, sseFrames, streamTokens } from '../reliability/harness.js';
import { type HostilePair, alongside, ask, errorEvents, startHostilePair } from '../helpers/hostile-upstream.js';

it('the relay refuses an error event that is not JSON', () => {
  for (const bad of ['{"error" <not json>', '{ "error": {"message": "x"', '{"error":{"message":"a"}} trailing']) {
    const relay = new SseRelay('chatcmpl-x', false);
    expect(relay.push(Buffer.from(`data: ${bad}\n\ndata: [DONE]\n\n`))).toBe('');
    expect({ bad, invalid: relay.invalid, sawError: relay.sawError }).toEqual({ bad, invalid: true, sawError: false });
  }
});

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair();
});
afterAll(async () => {
  await p.stop();
});

it('through the daemon: the chunks so far, then one upstream_error event; the broken event never forwarded', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=broken-error-event failAfterChunks=2]]', true));
  expect(r.status).toBe(200);
  expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
  expect(r.text).not.toContain('not json');
  expect(r.text).not.toContain('[DONE]');
  for (const f of sseFrames(r.text)) expect(() => JSON.parse(f.slice(6)) as unknown).not.toThrow();
  expect(errorEvents(r.text)).toEqual([
    obError('upstream_error', {
      message: 'The model server sent an event that is not valid JSON; the stream was ended.',
    }).toBody(),
  ]);
});
