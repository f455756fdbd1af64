import { Gauge, type Registry } from 'prom-client';

/** How often the loop is sampled, as prom-client's default (eventLoopMonitoringPrecision). */
const EVERY_MS = 10;
/** Samples kept between scrapes: the last 40 s at 10 ms; a slower scraper sees the latest ones. */
const KEEP = 4096;

/**
 * Event-loop lag, under the series names prom-client's default metrics use
 * (`nodejs_eventloop_lag_seconds` and its `_min`, `_max`, `_mean`, `_stddev`, `_p50`, `_p90`,
 * `_p99`), measured by how late a JavaScript interval runs rather than by Node's native
 * `monitorEventLoopDelay`: with that histogram enabled the daemon spent about 5 % more CPU per
 * request under load, measured side by side, while an interval at the same rate cost nothing
 * measurable (docs/performance.md, session 9). The statistics cover the samples since the last
 * scrape (the last 40 s at most); the gauge without a suffix is how long a setImmediate took at
 * scrape time, as prom-client's. Returns stop.
 */
export function registerEventLoopLag(registry: Registry, prefix: string): () => void {
  const samples = new Float64Array(KEEP);
  let count = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    samples[count % KEEP] = Math.max(0, now - last - EVERY_MS) / 1000;
    count++;
    last = now;
  }, EVERY_MS);
  timer.unref();

  const registers = [registry];
  const name = (suffix: string): string => `${prefix}nodejs_eventloop_lag_${suffix}seconds`;
  new Gauge({
    name: name(''),
    help: 'Lag of event loop in seconds.',
    registers,
    async collect() {
      const start = performance.now();
      await new Promise((r) => setImmediate(r));
      this.set((performance.now() - start) / 1000);
    },
  });
  // The registry reads its metrics in the order they were registered, each collect before its
  // values: `min` comes first and sets the figures of all seven, from the same samples.
  new Gauge({
    name: name('min_'),
    help: 'The minimum recorded event loop delay.',
    registers,
    collect() {
      // None since the last scrape (two scrapes within 10 ms): the figures stand.
      if (count === 0) return;
      const v = samples.slice(0, Math.min(count, KEEP)).sort();
      count = 0;
      let sum = 0;
      for (const x of v) sum += x;
      const m = sum / v.length;
      let sq = 0;
      for (const x of v) sq += (x - m) * (x - m);
      const at = (q: number): number => v[Math.min(v.length - 1, Math.floor(q * v.length))] ?? 0;
      this.set(v[0] ?? 0);
      max.set(v[v.length - 1] ?? 0);
      mean.set(m);
      stddev.set(Math.sqrt(sq / v.length));
      p50.set(at(0.5));
      p90.set(at(0.9));
      p99.set(at(0.99));
    },
  });
  const gauge = (suffix: string, help: string): Gauge => new Gauge({ name: name(`${suffix}_`), help, registers });
  const max = gauge('max', 'The maximum recorded event loop delay.');
  const mean = gauge('mean', 'The mean of the recorded event loop delays.');
  const stddev = gauge('stddev', 'The standard deviation of the recorded event loop delays.');
  const p50 = gauge('p50', 'The 50th percentile of the recorded event loop delays.');
  const p90 = gauge('p90', 'The 90th percentile of the recorded event loop delays.');
  const p99 = gauge('p99', 'The 99th percentile of the recorded event loop delays.');
  return () => clearInterval(timer);
}
