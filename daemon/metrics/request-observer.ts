import type { FastifyBaseLogger } from 'fastify';
import type { RelayObserver } from '../data-plane/upstream-relay.js';
import type { Metrics } from './metrics.js';

/**
 * One proxied request as the operator sees it: a model server failure is a warning in the log,
 * and with metrics on, its time to the first byte, its failures, its tokens and, for a stream,
 * its place among the open ones.
 */
export class RequestObserver implements RelayObserver {
  private readonly sentAt = performance.now();
  private open: boolean;

  constructor(
    private readonly m: Metrics | null,
    private readonly log: FastifyBaseLogger,
    private readonly reqId: string,
    private readonly instance: string,
    private readonly key: string,
    stream: boolean,
  ) {
    this.open = stream && m !== null;
    if (this.open) m?.streamOpened(instance);
  }

  responseStarted(): void {
    this.m?.firstByte(this.instance, (performance.now() - this.sentAt) / 1000);
  }

  upstreamFailed(code: string): void {
    this.log.warn({ reqId: this.reqId, instance: this.instance, key: this.key, code }, 'model server failed');
    this.m?.upstreamError(this.instance, code);
  }

  /** The exchange is over (called once, from the relay's countTokens). */
  over(prompt: number, completion: number, reasoning = 0): void {
    if (this.m === null) return;
    this.m.countTokens(this.instance, this.key, prompt, completion, reasoning);
    if (this.open) {
      this.open = false;
      this.m.streamClosed(this.instance);
    }
  }
}
