/**
 * Regression (upstream faults): an upstream event that was not valid JSON was forwarded
 * to the client as it was, so the OpenAI SDK threw a parse error instead of an API error. Now the
 * relay stops at it and the stream ends with one upstream_error event and no [DONE].
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import type { Simulator } from '../../simulator/simulator.js';
import {
  type Harness,
  chatBody,
  post,
  readyInstance,
  sseFrames,
  startHarness,
  startSim,
} from '../reliability/harness.js';

it('the relay does not forward a data event that is not JSON, nor anything after it', () => {
  const relay = new SseRelay('chatcmpl-x', false);
  const ok = relay.push(Buffer.from('data: {"id":"a","choices":[{"index":0,"delta":{"content":"t0 "}}]}\n\n'));
  expect(ok).toBe('data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"t0 "}}]}\n\n');
  expect(
    relay.push(
      Buffer.from('data: {"id":"a","choices":[{"index":0,"delta":{"cont\n\ndata: {"id":"a"}\n\ndata: [DONE]\n\n'),
    ),
  ).toBe('');
  expect({ invalid: relay.invalid, done: relay.done, contentChunks: relay.contentChunks }).toEqual({
    invalid: true,
    done: false,
    contentChunks: 1,
  });
  // A broken usage event is refused too.
  const usage = new SseRelay('chatcmpl-y', true);
  expect(usage.push(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":\n\n'))).toBe('');
  expect(usage.invalid).toBe(true);
});

let h: Harness;
let sim: Simulator;
let key: string;
beforeAll(async () => {
  h = await startHarness();
  const s = await startSim();
  sim = s.sim;
  key = await readyInstance(h, 'bad-json', s.url);
});
afterAll(async () => {
  await h.stop();
  await sim.close();
});

it('through the daemon: every event the client receives parses, and an error event ends the stream', async () => {
  const r = await post(h.baseUrl, key, chatBody('[[sim fail=invalid-json]]', { stream: true }));
  expect(r.status).toBe(200);
  const frames = sseFrames(r.text);
  expect(frames.map((f) => JSON.parse(f.slice(6)) as unknown)).toEqual([
    obError('upstream_error', {
      message: 'The model server sent an event that is not valid JSON; the stream was ended.',
    }).toBody(),
  ]);
});
