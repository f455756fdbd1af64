import type { RelayObserver } from '../data-plane/upstream-relay.js';
import type { Metrics } from './metrics.js';

/**
 * One proxied request as the metrics see it: its time to the model server's first byte, its
 * failures, its tokens and, for a stream, its place among the open ones.
 */
export class RequestObserver implements RelayObserver {
  private readonly sentAt = performance.now();
  private open: boolean;

  constructor(private readonly m: Metrics, private readonly instance: string, private readonly key: string, stream: boolean) {
    this.open = stream;
    if (stream) m.streamOpened(instance);
  }

  responseStarted(): void {
    this.m.firstByte(this.instance, (performance.now() - this.sentAt) / 1000);
  }

  upstreamFailed(code: string): void {
    this.m.upstreamError(this.instance, code);
  }

  /** The exchange is over (called once, from the relay's countTokens). */
  over(prompt: number, completion: number): void {
    this.m.countTokens(this.instance, this.key, prompt, completion);
    if (this.open) {
      this.open = false;
      this.m.streamClosed(this.instance);
    }
  }
}
