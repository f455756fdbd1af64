/**
 * The series of revoked keys and removed instances leave the exposition GONE_RETAIN_MS after a
 * scrape first finds them gone. Before, every key that ever made a request kept its series for the
 * daemon's life (and `ob_proxy_keys` kept a revoked series per instance ever removed): rentals
 * that come and go grew /metrics, and Prometheus' series count, without bound.
 */
import { expect, it } from 'vitest';
import { GONE_RETAIN_MS, Metrics } from '../../daemon/metrics/metrics.js';
import type { Registry as KeyRegistry } from '../../src/services/registry.js';

interface FakeKey {
  id: string;
  instance: string;
  status: 'active' | 'revoked';
}

function world() {
  const instances = new Map<string, object>([
    ['a', {}],
    ['b', {}],
  ]);
  const keys = new Map<string, FakeKey>([
    ['ka1', { id: 'ka1', instance: 'a', status: 'active' }],
    ['ka2', { id: 'ka2', instance: 'a', status: 'active' }],
    ['kb1', { id: 'kb1', instance: 'b', status: 'active' }],
  ]);
  const clock = { ms: 0, now: () => clock.ms };
  const m = new Metrics({
    keyLabel: true,
    keys: () =>
      ({
        instances,
        keys,
        keysOf: (id: string) => [...keys.values()].filter((k) => k.instance === id),
      }) as unknown as KeyRegistry,
    clock,
  });
  return { instances, keys, clock, m };
}

/** The exposition's sample lines that name `what`, without the process metrics. */
async function lines(m: Metrics, what: string): Promise<string[]> {
  const text = await m.scrape();
  return text
    .split('\n')
    .filter((l) => l.startsWith('ob_proxy_') && !l.startsWith('ob_proxy_process') && !l.startsWith('ob_proxy_nodejs'))
    .filter((l) => l.includes(what));
}

it("a revoked key's series stay for GONE_RETAIN_MS after a scrape finds it revoked, then go", async () => {
  const { keys, clock, m } = world();
  m.answered('a', 'ka1', 200, 0.01);
  m.answered('a', 'ka2', 200, 0.01);
  m.key(m.instance('a'), 'ka2').prompt += 7;
  (keys.get('ka2') as FakeKey).status = 'revoked';

  clock.ms = 1_000;
  expect(await lines(m, 'ka2')).toEqual([
    'ob_proxy_requests_total{instance="a",key="ka2",code="200"} 1',
    'ob_proxy_tokens_total{instance="a",key="ka2",kind="prompt"} 7',
  ]);
  clock.ms = 1_000 + GONE_RETAIN_MS - 1;
  expect(await lines(m, 'ka2')).toHaveLength(2);
  clock.ms = 1_000 + GONE_RETAIN_MS;
  expect(await lines(m, 'ka2')).toEqual([]);
  // The other key of the instance, and the instance's own series, are untouched.
  expect(await lines(m, 'ka1')).toEqual(['ob_proxy_requests_total{instance="a",key="ka1",code="200"} 1']);
  expect(await lines(m, 'ob_proxy_request_duration_seconds_count')).toEqual([
    'ob_proxy_request_duration_seconds_count{instance="a"} 2',
  ]);
});

it("a removed instance's series go as a whole, its keys gauge at once; not while a stream is open", async () => {
  const { instances, keys, clock, m } = world();
  m.answered('b', 'kb1', 200, 0.01);
  m.upstreamError('b', 'upstream_timeout');
  m.rateLimited('b', 'rpm');
  m.queueDepth('b', 0);
  m.queueWait('b', 0.5);
  const stream = m.instance('b');
  stream.streams = 1;
  stream.streamed = true;
  instances.delete('b');
  (keys.get('kb1') as FakeKey).status = 'revoked';

  expect(await lines(m, 'ob_proxy_keys{')).toEqual(['ob_proxy_keys{instance="a",status="active"} 2']);
  clock.ms = 10 * GONE_RETAIN_MS;
  // An open stream keeps it (and its wait starts when the stream has ended).
  expect((await lines(m, 'instance="b"')).length).toBeGreaterThan(0);
  stream.streams = 0;
  expect((await lines(m, 'instance="b"')).length).toBeGreaterThan(0);
  clock.ms += GONE_RETAIN_MS;
  expect(await lines(m, 'instance="b"')).toEqual([]);
  expect((await lines(m, 'instance="a"')).length).toBeGreaterThan(0);
});

it('an instance added again under its id before the wait is over keeps its series', async () => {
  const { instances, clock, m } = world();
  m.answered('b', 'kb1', 200, 0.01);
  instances.delete('b');
  clock.ms = 1;
  await m.scrape();
  instances.set('b', {});
  clock.ms = 2 * GONE_RETAIN_MS;
  await m.scrape();
  instances.delete('b');
  clock.ms = 3 * GONE_RETAIN_MS - 1;
  // Its first wait ended when it came back; this scrape starts a new one.
  expect(await lines(m, 'ob_proxy_requests_total{instance="b"')).toEqual([
    'ob_proxy_requests_total{instance="b",key="kb1",code="200"} 1',
  ]);
});
