/**
 * Regression: a body that needed a rewrite (`role: "developer"`) with 5,000 levels of
 * nesting in any field overflowed the stack while the upstream body was built, after the reply
 * was hijacked: 0 of 200 such requests were answered, each holding a socket until the client
 * left. Nesting is now bounded (400), and the upstream body is built before the hijack.
 */
import { expect, it } from 'vitest';
import { MAX_DEPTH } from '../../src/wire/json-body.js';
import { MODEL, post, setupReadyInstance } from '../reliability/harness.js';

const env = setupReadyInstance({ id: 'gpu-1' });

const nested = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
const body = (levels: number): string =>
  `{"model":"${MODEL}","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"}],"x":${nested(levels)}}`;

it('5,000 levels are refused with a 400 in our shape, every time, and nothing reaches the model server', async () => {
  const replies = await Promise.all(Array.from({ length: 20 }, () => post(env.h.baseUrl, env.key, body(5000))));
  for (const r of replies) {
    expect(r.json).toEqual({
      error: {
        message: `The request body nests objects or arrays deeper than ${MAX_DEPTH} levels. Flatten it.`,
        type: 'invalid_request_error',
        code: 'invalid_json',
        param: null,
      },
    });
  }
  expect(env.sim.requests).toEqual([]);
});

it('nesting up to the limit is forwarded, rewritten (developer sent as system)', async () => {
  // The body object, messages array and message object take three levels.
  const r = await post(env.h.baseUrl, env.key, body(MAX_DEPTH - 1));
  expect(r.status).toBe(200);
  const seen = await env.sim.waitFor(() => true);
  expect((seen.body as { messages: { role: string }[] }).messages[0]!.role).toBe('system');
  expect(JSON.stringify((seen.body as { x: unknown }).x)).toBe(nested(MAX_DEPTH - 1));
});
