import type { RelayObserver } from '../data-plane/relay-observer.js';
import type { InstanceSeries, KeySeries } from './hot-series.js';
import type { Metrics } from './metrics.js';

/**
 * One proxied request in the metrics (made only while they are on): its time to the first byte,
 * its model server's failures, its tokens and, for a stream, its place among the open ones. Its
 * instance's and key's series are looked up once, here. (The relay logs the failures itself.)
 */
export class RequestObserver implements RelayObserver {
  private readonly sentAt = performance.now();
  private open: boolean;
  private readonly series: InstanceSeries | null;
  private readonly keySeries: KeySeries | null;

  constructor(
    private readonly m: Metrics | null,
    private readonly instance: string,
    key: string,
    stream: boolean,
  ) {
    this.series = m === null ? null : m.instance(instance);
    this.keySeries = m === null || this.series === null ? null : m.key(this.series, key);
    this.open = stream && this.series !== null;
    if (this.open && this.series !== null) {
      this.series.streams++;
      this.series.streamed = true;
    }
  }

  responseStarted(): void {
    this.series?.ttfb.observe((performance.now() - this.sentAt) / 1000);
  }

  upstreamFailed(code: string): void {
    this.m?.upstreamError(this.instance, code);
  }

  /** The exchange is over (called once, from the relay's countTokens). */
  over(prompt: number, completion: number, reasoning = 0, estimated = 0): void {
    const k = this.keySeries;
    if (k === null) return;
    if (prompt > 0) k.prompt += prompt;
    if (completion > 0) k.completion += completion;
    if (reasoning > 0) k.reasoning += reasoning;
    if (estimated > 0) k.estimated += estimated;
    if (this.open && this.series !== null) {
      this.open = false;
      this.series.streams--;
    }
  }
}
