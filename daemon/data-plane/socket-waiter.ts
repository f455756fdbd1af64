import type { ObProxyError } from '../../src/errors.js';
import type { DaemonBasics, ExchangeDeps } from '../context.js';
import type { Waiter } from './admission.js';
import type { InflightEntry, InflightNode } from './inflight.js';
import { type QueueWarnDeps, queueRefusal, warnQueueRefusal } from './key-limits.js';

/** What a waiting message is to its socket (responses-socket.ts). */
export interface WaitingMessage {
  /** Answers the message with `err` (an error event); the socket stays open. */
  refuse(err: ObProxyError): void;
  /** Its key is checked again and, if it still passes, the message is sent holding the slot. */
  granted(): void;
}

/** What a waiting message touches: its instance's queue, the in-flight list, the queue's refusals. */
export type SocketWaiterDeps = Pick<ExchangeDeps, 'admission' | 'inflight'> &
  Pick<DaemonBasics, 'metrics'> &
  QueueWarnDeps;

/**
 * A socket's message waiting for a slot of its instance (admission.ts), as QueuedRequest is an
 * HTTP request's: in its key's in-flight list while it waits, so a revocation ends it at once;
 * out of the queue when its socket closes (`leave`).
 */
export class SocketWaiter implements Waiter, InflightNode {
  private over = false;
  private readonly queuedAt = performance.now();
  inflightEntry: InflightEntry | null = null;
  inflightPrev: InflightNode | null = null;
  inflightNext: InflightNode | null = null;

  constructor(
    private readonly ctx: SocketWaiterDeps,
    readonly key: string,
    private readonly instance: string,
    private readonly message: WaitingMessage,
  ) {}

  /** Out of the queue and of the in-flight list, for good (its socket closed). */
  leave(): void {
    if (this.over) return;
    this.over = true;
    this.ctx.admission?.cancel(this.instance, this);
    this.ctx.inflight.delete(this);
  }

  terminate(err: ObProxyError): void {
    if (this.over) return;
    this.leave();
    this.message.refuse(err);
  }

  grant(): void {
    const { ctx } = this;
    ctx.inflight.delete(this);
    ctx.metrics?.queueWait(this.instance, (performance.now() - this.queuedAt) / 1000);
    if (this.over) {
      ctx.admission?.leave(this.instance);
      return;
    }
    this.over = true;
    this.message.granted();
  }

  expire(): void {
    this.refuseQueued('queue_timeout');
  }

  evict(): void {
    this.refuseQueued('queue_full');
  }

  private refuseQueued(reason: 'queue_full' | 'queue_timeout'): void {
    if (this.over) return;
    this.leave();
    refuseQueued(this.ctx, reason, this.instance, this.message);
  }
}

/** A message refused by its instance's queue: counted and told as an HTTP request's refusal is. */
export function refuseQueued(
  ctx: SocketWaiterDeps,
  reason: 'queue_full' | 'queue_timeout',
  instance: string,
  message: WaitingMessage,
): void {
  ctx.metrics?.rateLimited(instance, reason);
  warnQueueRefusal(ctx, reason, instance);
  message.refuse(queueRefusal(reason, instance, ctx.config.queueTimeoutMs));
}
