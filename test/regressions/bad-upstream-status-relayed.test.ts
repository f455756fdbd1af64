/**
 * Regression: a status other than 200 or an error was relayed as it came: 204 and 304
 * reached the client with a Content-Length and no body, and a 201 carrying a whole completion
 * was turned into an "error" sent with status 201. Anything other than a 200 with a well-formed
 * answer, or an error status (4xx/5xx, passed on), is now 502 upstream_error, and the upstream
 * request is aborted (the simulator keeps those bodies open, so only an abort ends them).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import {
  type HostilePair,
  alongside,
  ask,
  expectUpstreamAborted,
  lastChatEnded,
  startHostilePair,
} from '../helpers/hostile-upstream.js';

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair();
});
afterAll(async () => {
  await p.stop();
});

it.each([201, 202, 206, 204, 304, 301, 302, 307])(
  'HTTP %i, plain and streaming: 502 upstream_error',
  async (status) => {
    for (const stream of [false, true]) {
      const r = await alongside(p, () => ask(p, `[[sim fail=bad-status status=${status}]]`, stream));
      expect({ stream, status: r.status, json: r.json }).toEqual({
        stream,
        status: 502,
        json: obError('upstream_error', {
          message: `The model server answered HTTP ${status}, which is not a chat completion; it was not relayed.`,
        }).toBody(),
      });
      if (status === 204 || status === 304) await lastChatEnded(p.hostile);
      else await expectUpstreamAborted(p.hostile);
    }
  },
);
