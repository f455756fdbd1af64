import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ObProxyError } from '../../src/errors.js';
import type { DaemonBasics, ExchangeDeps } from '../context.js';
import type { Waiter } from './admission.js';
import type { AuthContext } from './auth-context.js';
import { type KeyStandingDeps, answerIfKeyLapsed } from './key-standing.js';
import type { InflightEntry, InflightNode } from './inflight.js';
import { type QueueWarnDeps, queueRefusal, retryHeaders, warnQueueRefusal } from './key-limits.js';
import { replyError } from './send-error.js';

/** What a queued request touches: its instance's queue, the in-flight list, its key's standing. */
export type QueueDeps = Pick<ExchangeDeps, 'admission' | 'inflight'> & KeyStandingDeps & QueueWarnDeps;

/**
 * A request waiting for a slot of its instance (admission.ts). It is in its key's in-flight list
 * while it waits, so a revocation or a pack end ends it as it ends a request sent upstream: out of
 * the queue, answered with the error, at once (docs/contract.md §3), rather than holding its place until
 * its turn or the queue's time-out. Its key is checked again when its turn comes, in the turn it
 * is sent: a deployment stopped or moved back to pending while it waited is refused then, and it
 * never reaches the model server. A client that leaves while it waits leaves the queue.
 */
export class QueuedRequest implements Waiter, InflightNode {
  readonly key: string;
  private readonly queuedAt = performance.now();
  /** The proxy's own time until now; a wait in the queue is measured apart (queueWait). */
  private readonly added: number;
  /** Answered or gone: out of the queue for good (a grant already on its way finds it so). */
  private over = false;
  inflightEntry: InflightEntry | null = null;
  inflightPrev: InflightNode | null = null;
  inflightNext: InflightNode | null = null;

  constructor(
    private readonly ctx: QueueDeps,
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    private readonly instance: string,
    /** Sends it upstream, holding the instance's slot (proxied-route.ts). */
    private readonly send: () => void,
  ) {
    this.key = (request.auth as AuthContext).key.id;
    this.added = reply.elapsedTime / 1000;
    reply.raw.once('close', this.onClose);
  }

  private readonly onClose = (): void => {
    if (this.reply.raw.writableFinished) return;
    this.leaveQueue();
  };

  /** Out of the queue and of the in-flight list, for good. */
  private leaveQueue(): void {
    this.over = true;
    this.reply.raw.off('close', this.onClose);
    this.ctx.admission?.cancel(this.instance, this);
    this.ctx.inflight.delete(this);
  }

  /** Its key was revoked, or its pack ended, while it waited (inflight.ts). */
  terminate(err: ObProxyError): void {
    if (this.over) return;
    this.leaveQueue();
    // A daemon out of sync with its shared store: the wait its onRequest refusal would give.
    const headers = err.code === 'store_unreachable' ? { 'retry-after': '5' } : undefined;
    this.guarded(() => {
      replyError(this.reply, err, headers);
    });
  }

  grant(): void {
    const { ctx, request, reply } = this;
    reply.raw.off('close', this.onClose);
    ctx.inflight.delete(this);
    ctx.metrics?.queueWait(this.instance, (performance.now() - this.queuedAt) / 1000);
    if (this.over || reply.raw.destroyed) {
      ctx.admission?.leave(this.instance);
      return;
    }
    this.over = true;
    let refused = true;
    this.guarded(() => {
      refused = answerIfKeyLapsed(ctx, request, reply);
    });
    if (refused) {
      ctx.admission?.leave(this.instance);
      return;
    }
    ctx.metrics?.addedTime(this.added);
    this.send();
  }

  expire(): void {
    this.leaveQueue();
    this.guarded(() => refuseQueued(this.ctx, this.reply, 'queue_timeout', this.instance));
  }

  /** Its place went to a key holding less than its share: the answer a full queue gives. */
  evict(): void {
    this.leaveQueue();
    this.guarded(() => refuseQueued(this.ctx, this.reply, 'queue_full', this.instance));
  }

  /** Runs on a timer or a microtask, where a throw would end the process: logged and the socket closed instead. */
  private guarded(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.ctx.log.error({ err, reqId: this.request.id }, 'unhandled error answering a queued request');
      this.reply.raw.destroy();
    }
  }
}

export function refuseQueued(
  ctx: Pick<DaemonBasics, 'metrics'> & QueueWarnDeps,
  reply: FastifyReply,
  reason: 'queue_full' | 'queue_timeout',
  instance: string,
): void {
  ctx.metrics?.rateLimited(instance, reason);
  warnQueueRefusal(ctx, reason, instance);
  replyError(reply, queueRefusal(reason, instance, ctx.config.queueTimeoutMs), retryHeaders(1000));
}
