/**
 * Per-instance admission, end to end: real `ob-proxy serve` with `--max-concurrency`, `--queue`
 * and `--queue-timeout`, real `ob-proxy simulate` and the real CLI. Past the queue, or past its
 * wait, a request gets 429 and is never sent; the queue is served in order, fairly between keys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, type KeyJson, ask, chatsOf, rateLimited } from '../helpers/limited-chat.js';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  eventually,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { MODEL, readyInstance } from '../helpers/store-home.js';

describe('per-instance admission: --max-concurrency 1 --queue 4', () => {
  let home: string;
  let sim: SimProcess;
  let serve: ServeProcess;
  let metricsUrl: string;
  let a: string;
  let b: KeyJson;

  beforeAll(async () => {
    home = await tmpHome();
    sim = await startSimulate([MODEL]);
    serve = await startServe(home, [
      '--grace',
      '1',
      '--max-concurrency',
      '1',
      '--queue',
      '4',
      '--queue-timeout',
      '60',
      '--metrics-port',
      '0',
    ]);
    metricsUrl = serve.logs().find((l) => l.msg === 'ob-proxy serving')!.metrics as string;
    a = (await readyInstance(home, 'gpu-1', sim.url)).secret;
    b = await cliJson<KeyJson>(['keys', 'create', '--instance', 'gpu-1', '--name', 'b'], home);
  });
  afterAll(async () => {
    await serve?.stop();
    await sim?.stop();
  });

  async function metric(name: string, labels: string): Promise<number | undefined> {
    const text = await (await fetch(metricsUrl)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  }

  async function depth(n: number): Promise<void> {
    await eventually(async () => (await metric('ob_proxy_queue_depth', 'instance="gpu-1"')) === n, `queue depth ${n}`);
  }

  async function upstreamContents(): Promise<string[]> {
    return (await chatsOf(sim)).map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content);
  }

  /** One request held by the model server (its only slot), released by `release`. */
  async function holdSlot(tag: string): Promise<{ release(): Promise<void> }> {
    const ctl = new AbortController();
    const held = ask(serve.baseUrl, a, `[[sim fail=hang]] ${tag}`, ctl.signal).catch(() => null);
    await eventually(
      async () => (await upstreamContents()).includes(`[[sim fail=hang]] ${tag}`),
      'the held request upstream',
    );
    return {
      release: async () => {
        ctl.abort();
        await held;
      },
    };
  }

  it('a sixth concurrent request gets 429; the queued ones are served in order, round robin across keys; a key under its share takes a place of the key filling the queue', async () => {
    const slot = await holdSlot('hold-1');
    const answers: Promise<Answer>[] = [];
    for (const [key, tag] of [
      [a, 'a1'],
      [a, 'a2'],
      [a, 'a3'],
      [b.secret, 'b1'],
    ] as const) {
      answers.push(ask(serve.baseUrl, key, tag));
      await depth(answers.length);
    }
    const full = rateLimited('The deployment "gpu-1" is busy: its queue is full. Retry shortly.');
    // The sixth, from the key holding 3 of the 4 places (over its share of 4 / 2 keys): refused.
    const sixth = await ask(serve.baseUrl, a, 'a4');
    expect(sixth.status).toBe(429);
    expect(sixth.headers.get('retry-after')).toBe('1');
    expect(sixth.json).toEqual(full);
    expect(await metric('ob_proxy_rate_limited_total', 'instance="gpu-1",limit="queue_full"')).toBe(1);
    // The log line is written beside the answer, not before it: wait for it to arrive.
    await eventually(() => serve.logs().some((l) => l.reason === 'queue_full'), 'the queue_full warning');
    expect(
      serve
        .logs()
        .filter((l) => l.reason === 'queue_full')
        .map((l) => [l.level, l.instance, l.code]),
    ).toEqual([[40, 'gpu-1', 'rate_limited']]);

    // The seventh, from b (1 place, under its share of 2): queued; a3, a's newest, gets the full queue's 429.
    const b2 = ask(serve.baseUrl, b.secret, 'b2');
    const evicted = await answers[2]!;
    expect(evicted.status).toBe(429);
    expect(evicted.headers.get('retry-after')).toBe('1');
    expect(evicted.json).toEqual(full);
    expect(await metric('ob_proxy_rate_limited_total', 'instance="gpu-1",limit="queue_full"')).toBe(2);
    await depth(4);

    await slot.release();
    const served = await Promise.all([answers[0]!, answers[1]!, answers[3]!, b2]);
    expect(served.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect((await upstreamContents()).slice(-5)).toEqual(['[[sim fail=hang]] hold-1', 'a1', 'b1', 'a2', 'b2']);
    expect((await upstreamContents()).filter((t) => t === 'a3' || t === 'a4')).toEqual([]);
    await depth(0);
    expect(await metric('ob_proxy_queue_wait_seconds_count', 'instance="gpu-1"')).toBe(4);
  }, 30_000);

  it('a key revoked while queued is refused with 401 at once, its place freed; a client that leaves is dropped; neither is sent', async () => {
    const c = await cliJson<KeyJson>(['keys', 'create', '--instance', 'gpu-1', '--name', 'c'], home);
    const slot = await holdSlot('hold-2');
    const revokedAnswer = ask(serve.baseUrl, c.secret, 'from-revoked');
    await depth(1);
    const gone = new AbortController();
    const left = ask(serve.baseUrl, b.secret, 'from-gone', gone.signal).catch(() => 'aborted');
    await depth(2);
    gone.abort();
    expect(await left).toBe('aborted');
    await depth(1);
    await cliJson(['keys', 'revoke', c.id, '--yes'], home);
    // Ended with its key, as a request sent upstream is: not left waiting for its turn.
    const refused = await revokedAnswer;
    expect(refused.status).toBe(401);
    expect((refused.json as { error: { code: string } }).error.code).toBe('revoked_api_key');
    await depth(0);
    const after = ask(serve.baseUrl, b.secret, 'after');
    await depth(1);
    await slot.release();
    expect((await after).status).toBe(200);
    const contents = await upstreamContents();
    expect(contents.slice(-2)).toEqual(['[[sim fail=hang]] hold-2', 'after']);
    expect(contents.filter((t) => t.startsWith('from-'))).toEqual([]);
  }, 30_000);
});

describe('per-instance admission: --queue-timeout', () => {
  it('a request that waits past the time-out gets 429 and is never sent; the slot then serves the next', async () => {
    const home = await tmpHome();
    const sim = await startSimulate([MODEL]);
    const serve = await startServe(home, ['--grace', '1', '--max-concurrency', '1', '--queue-timeout', '0.3']);
    try {
      const { secret } = await readyInstance(home, 'gpu-1', sim.url);
      const hold = new AbortController();
      const held = ask(serve.baseUrl, secret, '[[sim fail=hang]] held', hold.signal).catch(() => null);
      await eventually(async () => (await chatsOf(sim)).length === 1, 'the held request upstream');
      const waited = await ask(serve.baseUrl, secret, 'waited');
      expect(waited.status).toBe(429);
      expect(waited.headers.get('retry-after')).toBe('1');
      expect(waited.json).toEqual(
        rateLimited(
          'The deployment "gpu-1" is busy: the request waited 0.3 s in its queue without a turn. Retry shortly.',
        ),
      );
      hold.abort();
      await held;
      expect((await ask(serve.baseUrl, secret, 'next')).status).toBe(200);
      expect(
        (await chatsOf(sim)).map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content),
      ).toEqual(['[[sim fail=hang]] held', 'next']);
      await eventually(() => serve.logs().some((l) => l.reason === 'queue_timeout'), 'the queue_timeout warning');
      expect(serve.logs().filter((l) => l.reason === 'queue_timeout')).toHaveLength(1);
    } finally {
      await serve.stop();
      await sim.stop();
    }
  }, 30_000);
});
