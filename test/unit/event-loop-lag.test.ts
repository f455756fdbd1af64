import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerEventLoopLag } from '../../daemon/metrics/event-loop-lag.js';

/** The value of an unlabelled series in a Prometheus text exposition. */
function read(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`${name} not exposed`);
  return Number(line.slice(name.length + 1));
}

const SUFFIXES = ['min', 'p50', 'p90', 'p99', 'max'];

describe('event-loop lag', () => {
  it("reports a blocked loop under prom-client's series names, from the samples since the last scrape", async () => {
    const registry = new Registry();
    const stop = registerEventLoopLag(registry, 'x_');
    try {
      // The loop is busy for 150 ms: the interval due in that time runs at least 140 ms late.
      const until = performance.now() + 150;
      while (performance.now() < until);
      await new Promise((r) => setTimeout(r, 30));
      const text = await registry.metrics();
      const figures = SUFFIXES.map((s) => read(text, `x_nodejs_eventloop_lag_${s}_seconds`));
      expect(figures[4]).toBeGreaterThanOrEqual(0.14);
      expect(figures[4]).toBeLessThan(5);
      // Ordered as statistics of one sample set are.
      for (let i = 1; i < figures.length; i++) expect(figures[i]).toBeGreaterThanOrEqual(figures[i - 1]!);
      expect(read(text, 'x_nodejs_eventloop_lag_mean_seconds')).toBeGreaterThan(0);
      expect(read(text, 'x_nodejs_eventloop_lag_stddev_seconds')).toBeGreaterThan(0);
      expect(read(text, 'x_nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);

      // The next scrape covers only what came after: an idle loop, nowhere near 140 ms late.
      await new Promise((r) => setTimeout(r, 50));
      const after = await registry.metrics();
      expect(read(after, 'x_nodejs_eventloop_lag_max_seconds')).toBeLessThan(0.14);
    } finally {
      stop();
    }
  });
});
