/**
 * Regression: an upstream error event followed by the end of the body gave the
 * client two error events: the upstream's, then ours ("ended the stream before it was
 * complete"). An error event now ends the stream: the client gets exactly one, no [DONE], and
 * nothing more is read from the model server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { expectedTokens, sseFrames, streamTokens } from '../reliability/harness.js';
import { type HostilePair, alongside, ask, errorEvents, startHostilePair } from '../helpers/hostile-upstream.js';

const RUNNER = 'model runner has unexpectedly stopped, this may be due to resource limitations or an internal error';

// Both relay paths: the learned layouts must never let an error event through as an ordinary one.
describe.each([
  ['fast path', true],
  ['slow path forced (OB_PROXY_RELAY_FAST_PATH=0)', false],
])('%s', (_name, relayFastPath) => {
  let p: HostilePair;
  beforeAll(async () => {
    p = await startHostilePair({ relayFastPath });
  });
  afterAll(async () => {
    await p.stop();
  });

  it('the relay stops at an error event', () => {
    const relay = new SseRelay('chatcmpl-x', false, relayFastPath ? undefined : null);
    expect(relay.push(Buffer.from('data: {"error":{"message":"boom"}}\n\ndata: {"id":"a","choices":[]}\n\n'))).toBe(
      'data: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
    );
    expect(relay.sawError).toBe(true);
  });

  it("an error event then EOF: the chunks so far and exactly one error event (the server's, in our shape), no [DONE]", async () => {
    // Twice: the second stream meets layouts the first taught the instance.
    for (let i = 0; i < 2; i++) {
      const r = await alongside(p, () => ask(p, '[[sim fail=error-event failAfterChunks=2]]', true));
      expect(r.status).toBe(200);
      expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
      expect(errorEvents(r.text)).toEqual([
        { error: { message: `Model server error: ${RUNNER}`, type: 'api_error', param: null, code: 'upstream_error' } },
      ]);
      expect(sseFrames(r.text).at(-1)?.startsWith('data: {"error"')).toBe(true);
      expect(r.text).not.toContain('[DONE]');
    }
  });

  it("an `event: error` then EOF: one error event in our shape, with the server's message and code", async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=named-error-event failAfterChunks=2]]', true));
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
    expect(errorEvents(r.text)).toEqual([
      { error: { message: 'Model server error: boom', type: 'api_error', code: 'overloaded', param: null } },
    ]);
    expect(r.text).not.toContain('event:');
    expect(r.text).not.toContain('[DONE]');
  });
});
