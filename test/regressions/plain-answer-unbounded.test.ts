/**
 * Regression: a non-streaming answer was collected whole, whatever its size: a 200 MB
 * answer took 400 MB of RSS and blocked the event loop 1.5 s, and an endless one grew RSS by
 * about 48 MB/s until the kernel killed the gateway. Now a plain answer is capped (default
 * 32 MiB, here 1 MiB): past it, or when its Content-Length announces more, the client gets 502
 * upstream_error and the upstream request is aborted.
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

const CAP = 1024 * 1024;
const tooLarge = obError('upstream_error', {
  message: `The model server's answer is larger than ${CAP} bytes; it was not relayed.`,
}).toBody();

let p: HostilePair;
beforeAll(async () => {
  p = await startHostilePair({ maxAnswerBytes: CAP });
});
afterAll(async () => {
  await p.stop();
});

it('a huge answer (its Content-Length over the cap): 502 upstream_error, upstream aborted', async () => {
  const r = await alongside(p, () => ask(p, `[[sim fail=huge-body bodyBytes=${8 * CAP}]]`, false));
  expect({ status: r.status, json: r.json }).toEqual({ status: 502, json: tooLarge });
  await expectUpstreamAborted(p.hostile);
});

it('an endless answer (chunked, no length): 502 upstream_error, upstream aborted', async () => {
  for (const mode of ['endless-body', 'endless-line']) {
    const r = await alongside(p, () => ask(p, `[[sim fail=${mode}]]`, false));
    expect({ mode, status: r.status, json: r.json }).toEqual({ mode, status: 502, json: tooLarge });
    await expectUpstreamAborted(p.hostile);
  }
});

it('an answer under the cap is relayed whole', async () => {
  const r = await alongside(p, () => ask(p, `[[sim fail=huge-body bodyBytes=${CAP - 4096}]]`, false));
  expect(r.status).toBe(200);
  const json = r.json as { choices: { message: { content: string } }[] };
  expect(json.choices[0]?.message.content).toBe('a'.repeat(CAP - 4096));
});
