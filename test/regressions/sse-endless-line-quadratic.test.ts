/**
 * Regression (one model server takes the gateway down): an SSE line that never ended
 * made the relay concatenate its whole pending buffer again on every read, so its cost grew
 * quadratically (7 CPU-seconds per second, /healthz at 3-5 s, other instances timing out, RSS
 * 85 -> 440 MB) and nothing bounded it. Now pending bytes are kept as pieces and joined once,
 * when the frame ends, and an unfinished frame past the cap (default 1 MiB) ends the stream with
 * one upstream_error event and aborts the upstream request.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { obError } from '../../src/errors.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import {
  type HostilePair,
  alongside,
  ask,
  expectUpstreamAborted,
  startHostilePair,
} from '../helpers/hostile-upstream.js';

const HEAD = 'data: {"id":"a","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"';
const PIECE = Buffer.alloc(64 * 1024, 'a');

it('holds an unfinished frame as pieces, copies each byte a bounded number of times, and stops at the cap', () => {
  const cap = 1024 * 1024;
  const relay = new SseRelay('chatcmpl-x', false, undefined, cap);
  let copied = 0;
  const original = Buffer.concat.bind(Buffer);
  const concat = vi.spyOn(Buffer, 'concat').mockImplementation((list, total) => {
    const out = original(list, total);
    copied += out.length;
    return out;
  });
  try {
    let fed = 0;
    expect(relay.push(Buffer.from(HEAD))).toBe('');
    fed += HEAD.length;
    for (let i = 0; i < 15; i++) {
      expect(relay.push(PIECE)).toBe('');
      fed += PIECE.length;
      // Never more than what the model server sent of this frame, and never past the cap.
      expect(relay.pendingBytes).toBe(fed);
      expect(relay.pendingBytes).toBeLessThanOrEqual(cap);
    }
    // The old code copied the whole pending buffer on every read: 15 reads, 8 MB copied for 1 MB sent.
    expect(copied).toBeLessThanOrEqual(2 * fed);
    expect(relay.invalid).toBe(false);
    // Past the cap: refused, and the pieces are let go.
    expect(relay.push(PIECE)).toBe('');
    expect({ invalid: relay.invalid, reason: relay.invalidReason, pending: relay.pendingBytes }).toEqual({
      invalid: true,
      reason: 'frame_too_large',
      pending: 0,
    });
  } finally {
    concat.mockRestore();
  }
});

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair();
});
afterAll(async () => {
  await p.stop();
});

it('through the daemon: one upstream_error event, no [DONE], the upstream request aborted, a neighbour unharmed', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=endless-line]]', true));
  expect(r.status).toBe(200);
  expect(r.text).toBe(
    `data: ${JSON.stringify(obError('upstream_error', { message: 'The model server sent an event larger than 1048576 bytes; the stream was ended.' }).toBody())}\n\n`,
  );
  await expectUpstreamAborted(p.hostile);
});
