/**
 * Regression: an error status's body was collected whole, so a 200 MB error body took
 * 200 MB of memory before the client got its answer. Now an error body is capped (default
 * 64 KiB): past it the client gets 502 upstream_error naming the upstream status, and the
 * upstream request is aborted; under it the status and message are passed on as before.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import {
  type HostilePair,
  alongside,
  ask,
  expectUpstreamAborted,
  startHostilePair,
} from '../helpers/hostile-upstream.js';

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair();
});
afterAll(async () => {
  await p.stop();
});

it('an error body over the cap: 502 upstream_error, upstream aborted', async () => {
  for (const stream of [false, true]) {
    const r = await alongside(p, () => ask(p, '[[sim fail=huge-error errorStatus=503 bodyBytes=209715200]]', stream));
    expect({ status: r.status, json: r.json }).toEqual({
      status: 502,
      json: obError('upstream_error', {
        message: 'The model server answered HTTP 503 with an error body larger than 65536 bytes; it was not relayed.',
      }).toBody(),
    });
    await expectUpstreamAborted(p.hostile);
  }
});

it('an error body under the cap: the same status and its message', async () => {
  const r = await alongside(p, () => ask(p, '[[sim fail=huge-error errorStatus=503 bodyBytes=1000]]', false));
  expect({ status: r.status, json: r.json }).toEqual({
    status: 503,
    json: {
      error: {
        message: `Model server error (HTTP 503): ${'a'.repeat(1000)}`,
        type: 'api_error',
        code: 'upstream_error',
        param: null,
      },
    },
  });
});
