/**
 * The daemon's live figures for the console: GET /v1/stats on the socket holds,
 * per instance, what each one-second sample counted (requests, completion tokens, errors) and
 * the streams open at each, from counters the data plane keeps in memory. After a known mix of
 * requests the samples add up to exactly it. Real daemon, real simulator.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { hello, postChat } from '../helpers/chat.js';
import { type ServeProcess, type SimProcess, eventually } from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';

const MODEL = 'gemma4:26b';
const sum = (a: number[]): number => a.reduce((n, x) => n + x, 0);

describe('GET /v1/stats', () => {
  let serve: ServeProcess;
  let sim: SimProcess;
  let client: DaemonClient;
  let key: string;

  beforeAll(async () => {
    const d = await startDaemonAndSim({ serveArgs: ['--probe-interval', '0'] });
    ({ sim, serve, key } = d);
    client = new DaemonClient(join(d.home, 'ob-proxy.sock'));
  });
  afterAll(async () => {
    await serve.stop();
    await sim.stop();
  });

  it('adds up to the requests, completion tokens and errors sent, and counts open streams while they are open', async () => {
    expect((await client.stats()).instances).toEqual([]);
    let tokens = 0;
    for (let i = 0; i < 3; i++) {
      const r = await postChat(serve.baseUrl, key, hello(MODEL));
      tokens += (r.json as { usage: { completion_tokens: number } }).usage.completion_tokens;
    }
    expect(
      (
        await postChat(
          serve.baseUrl,
          key,
          hello(MODEL, { messages: [{ role: 'user', content: '[[sim fail=http-error]]' }] }),
        )
      ).status,
    ).toBe(500);

    // A slow stream: open while we look.
    const slow = postChat(
      serve.baseUrl,
      key,
      hello(MODEL, {
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: '[[sim tokensPerSecond=10 chunks=15]]' }],
      }),
    );
    const open = await eventually(
      async () => {
        const g = (await client.stats()).instances.find((i) => i.instance === 'gpu-1');
        return g !== undefined && g.openStreams === 1 && g.streams.at(-1) === 1 ? g : undefined;
      },
      'a sample with the stream open',
      10_000,
    );
    expect(open.openStreams).toBe(1);
    const streamed = await slow;
    const usage = JSON.parse(
      streamed.text
        .split('\n\n')
        .filter((f) => f.includes('"usage"'))
        .at(-1)!
        .slice(6),
    ) as { usage: { completion_tokens: number } };
    tokens += usage.usage.completion_tokens;

    const done = await eventually(
      async () => {
        const g = (await client.stats()).instances.find((i) => i.instance === 'gpu-1');
        return g !== undefined && sum(g.requests) === 5 && g.streams.at(-1) === 0 && sum(g.tokens) === tokens
          ? g
          : undefined;
      },
      'the samples to hold every request',
      10_000,
    );
    expect(sum(done.errors)).toBe(1);
    expect(done.openStreams).toBe(0);
    // One sample a second (the daemon's own timer), the rings of one length.
    expect(
      new Set([done.requests.length, done.tokens.length, done.errors.length, done.streams.length, done.sampleMs.length])
        .size,
    ).toBe(1);
    expect(done.sampleMs.every((ms) => ms > 0)).toBe(true);
    const lastMs = done.sampleMs.at(-1)!;
    expect(done.requestsPerSecond).toBeCloseTo((done.requests.at(-1)! * 1000) / lastMs, 6);
  });
});
