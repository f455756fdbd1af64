import type { Metric, Registry } from 'prom-client';

/**
 * What the request path counts, kept as plain numbers and turned into prom-client samples only
 * when /metrics is scraped. prom-client's own `inc(labels)` and `observe(labels)` validate the
 * labels and build a hash string on every call (its `labels()` children too: they are the same
 * call bound), which put metrics at several microseconds per request; these are a map look-up
 * per request and a few additions (docs/performance.md, "Metrics and limits: what they cost").
 */

/** One histogram's counts: `counts[i]` for values ≤ `bounds[i]`, the last one +Inf; not cumulative. */
export class Buckets {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > (b[i] as number)) i++;
    this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += v;
    this.count++;
  }
}

/** One key of one instance (key '' without the key label, or before a key was known). */
export class KeySeries {
  /** HTTP status → requests answered with it. */
  readonly codes = new Map<number, number>();
  prompt = 0;
  completion = 0;
  /** Part of completion, where the model server reports it apart. */
  reasoning = 0;
  /** Part of prompt and completion: charged by estimate, not reported by the model server. */
  estimated = 0;

  answered(status: number): void {
    this.codes.set(status, (this.codes.get(status) ?? 0) + 1);
  }
}

export class InstanceSeries {
  readonly keys = new Map<string, KeySeries>();
  readonly duration: Buckets;
  readonly ttfb: Buckets;
  streams = 0;
  /** A stream was relayed here once: its gauge is exposed from then on, at 0 when none is open. */
  streamed = false;

  constructor(bounds: readonly number[]) {
    this.duration = new Buckets(bounds);
    this.ttfb = new Buckets(bounds);
  }

  key(id: string): KeySeries {
    let k = this.keys.get(id);
    if (k === undefined) this.keys.set(id, (k = new KeySeries()));
    return k;
  }
}

/**
 * A histogram read from `Buckets` at scrape time, registered with the registry like prom-client's
 * own (the registry asks a metric for `name`, `type` and `get()`; the text is prom-client's).
 */
interface Sample {
  labels: Record<string, string>;
  value: number;
  metricName: string;
}

class CollectedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly series: () => Iterable<readonly [Record<string, string>, Buckets]>,
  ) {}

  get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: string }> {
    const values: Sample[] = [];
    for (const [labels, b] of this.series()) {
      let acc = 0;
      for (let i = 0; i <= b.bounds.length; i++) {
        acc += b.counts[i] as number;
        const le = i < b.bounds.length ? String(b.bounds[i]) : '+Inf';
        values.push({ labels: { ...labels, le }, value: acc, metricName: `${this.name}_bucket` });
      }
      values.push({ labels, value: b.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: b.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator });
  }

  /** The counts belong to the request path: nothing to reset from here. */
  reset(): void {}
}

export function registerHistogram(
  registry: Registry,
  name: string,
  help: string,
  series: () => Iterable<readonly [Record<string, string>, Buckets]>,
): void {
  registry.registerMetric(new CollectedHistogram(name, help, series) as unknown as Metric);
}
