import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';
import { completionId } from '../../src/ids.js';
import { clipped } from '../../src/printable.js';
import { type ChatRequest, parseChatBody, upstreamBody, validateChatRequest } from '../../src/wire/chat-request.js';
import type { DaemonContext } from '../context.js';
import { estimateCompletionTokens, estimatePromptTokens, learnPace } from '../../src/wire/prompt-estimate.js';
import { RequestObserver } from '../metrics/request-observer.js';
import type { Waiter } from './admission.js';
import { type AuthContext, recheck, refuse } from './auth-hook.js';
import type { InflightEntry, InflightNode } from './inflight.js';
import { queueRefusal, retryHeaders, warnQueueRefusal } from './key-limits.js';
import { replyError, writeRawError } from './send-error.js';
import { PlainRelay, type RelayContext, StreamRelay } from './upstream-relay.js';
import type { ExchangeSpan } from '../tracing/exchange-span.js';
import type { Tracing } from '../tracing/tracer.js';

const INFO_LEVELS = new Set(['trace', 'debug', 'info']);
const JSON_TYPE = /^application\/json\s*(;|$)/i;
// JSON is UTF-8 (RFC 8259); a body declared in another charset would be read as something else.
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;
const UTF8 = /^utf-?8$/i;

export function makeChatHandler(ctx: DaemonContext) {
  // Not async: the reply is hijacked, so Fastify need not wait on a promise for each request.
  return function chatCompletions(request: FastifyRequest, reply: FastifyReply): void {
    // Checks 3 to 5 again, now that the body is in: before any check of the body (docs/contract.md §3
    // order), and in the turn the request is registered in flight (proxy).
    const refusal = recheck(ctx, request);
    if (refusal !== null) {
      refuse(ctx, reply, refusal);
      return;
    }
    const auth = request.auth as AuthContext;
    let chat: ChatRequest;
    let upstream: Buffer | string;
    try {
      const raw = request.body;
      const body = parseChatBody(Buffer.isBuffer(raw) ? raw : Buffer.alloc(0));
      const type = request.headers['content-type'] ?? '';
      if (!JSON_TYPE.test(type)) {
        throw obError('invalid_request', { message: 'Content-Type must be application/json.' });
      }
      const charset = CHARSET.exec(type);
      if (charset !== null && !UTF8.test(charset[1] ?? '')) {
        throw obError('invalid_request', {
          message: 'The body must be UTF-8: send Content-Type: application/json (charset=utf-8, if any).',
        });
      }
      chat = validateChatRequest(body);
      if (chat.model !== auth.instance.model) {
        throw obError('model_mismatch', {
          param: 'model',
          message: `This API key is bound to a deployment of "${auth.instance.model}"; the request asked for "${clipped(chat.model)}". Set model to "${auth.instance.model}".`,
        });
      }
      // Built before the reply is hijacked: past that point Fastify can no longer answer a throw.
      upstream = upstreamBody(raw as Buffer, chat);
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      replyError(reply, err);
      return;
    }
    const admission = ctx.admission;
    if (admission === null) {
      ctx.metrics?.addedTime(reply.elapsedTime / 1000);
      send(ctx, request, reply, chat, upstream, null);
      return;
    }
    const instance = auth.instance.id;
    if (admission.take(instance)) {
      ctx.metrics?.addedTime(reply.elapsedTime / 1000);
      send(ctx, request, reply, chat, upstream, instance);
    } else if (!reply.raw.destroyed) {
      // (A response already closed would not say so again: its client left, and it waits for no one.)
      const waiter = new QueuedRequest(ctx, request, reply, chat, upstream, instance);
      if (admission.wait(instance, waiter) === 'full') refuseQueued(ctx, reply, 'queue_full', instance);
      else ctx.inflight.add(auth.key, waiter);
    }
  };
}

/**
 * A request waiting for a slot of its instance (admission.ts). It is in its key's in-flight list
 * while it waits, so a revocation or a pack end ends it as it ends a request sent upstream: out of
 * the queue, answered with the error, at once (docs/contract.md §3), rather than holding its place until
 * its turn or the queue's time-out. Its key is checked again when its turn comes, in the turn it
 * is sent: a deployment stopped or moved back to pending while it waited is refused then, and it
 * never reaches the model server. A client that leaves while it waits leaves the queue.
 */
class QueuedRequest implements Waiter, InflightNode {
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
    private readonly ctx: DaemonContext,
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    private readonly chat: ChatRequest,
    private readonly upstream: Buffer | string,
    private readonly instance: string,
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
    const refusal = recheck(ctx, request);
    if (refusal !== null) {
      ctx.admission?.leave(this.instance);
      this.guarded(() => refuse(ctx, reply, refusal));
      return;
    }
    ctx.metrics?.addedTime(this.added);
    send(ctx, request, reply, this.chat, this.upstream, this.instance);
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

function refuseQueued(
  ctx: DaemonContext,
  reply: FastifyReply,
  reason: 'queue_full' | 'queue_timeout',
  instance: string,
): void {
  ctx.metrics?.rateLimited(instance, reason);
  warnQueueRefusal(ctx, reason, instance);
  replyError(reply, queueRefusal(reason, instance, ctx.config.queueTimeoutMs), retryHeaders(1000));
}

/** Hijacks the reply and sends the request upstream; `slot`: the instance whose admission slot it holds. */
function send(
  ctx: DaemonContext,
  request: FastifyRequest,
  reply: FastifyReply,
  chat: ChatRequest,
  upstream: Buffer | string,
  slot: string | null,
): void {
  const auth = request.auth as AuthContext;
  reply.hijack();
  const started = performance.now();
  let relay: PlainRelay | StreamRelay;
  try {
    const trace = ctx.tracing === null ? null : ctx.tracing.exchange(reply, auth, chat);
    relay = proxy(ctx, request, reply.raw, auth, chat, upstream, slot, trace);
  } catch (err) {
    // Nothing answers a hijacked reply but us: a throw here would hold the socket until the client left.
    if (slot !== null) ctx.admission?.leave(slot);
    ctx.log.error({ err, reqId: request.id }, 'unhandled error after hijack');
    writeRawError(reply.raw, obError('internal_error'), request.id, request.rateLimit);
    return;
  }
  // The access line; its object is not even built when info is off (--log-level warn). Its
  // closure names strings and the response only: the request and `chat` hold the whole body.
  if (INFO_LEVELS.has(ctx.log.level)) {
    const reqId = request.id;
    const key = auth.key.id;
    const instance = auth.instance.id;
    const stream = chat.stream;
    const res = reply.raw;
    void relay.done.then(() => {
      ctx.log.info(
        {
          reqId,
          key,
          instance,
          stream,
          status: res.statusCode,
          ms: Math.round((performance.now() - started) * 100) / 100,
        },
        'chat completion',
      );
    });
  }
}

function proxy(
  ctx: DaemonContext,
  request: FastifyRequest,
  res: ServerResponse,
  auth: AuthContext,
  chat: ChatRequest,
  body: Buffer | string,
  slot: string | null,
  trace: ExchangeSpan | null,
): PlainRelay | StreamRelay {
  const sentAt = ctx.clock.now();
  ctx.usage.record(auth.key, sentAt, 0, 0);
  const live = ctx.live.counter(auth.instance.id);
  live.requests += 1;
  if (chat.stream) live.openStreams += 1;
  const inflight = ctx.inflight;
  // Numbers, not the body nor `chat` (its `rewritten` holds the whole parsed request): the
  // closure below lives as long as the answer, and what it names is kept that long.
  const bodyLength = body.length;
  const media = chat.media;
  const stream = chat.stream;
  const completionCap = chat.completionCap;
  // Only while metrics are on: a request keeps it for its whole life, and scavenges copy it.
  const observer =
    ctx.metrics === null ? null : new RequestObserver(ctx.metrics, auth.instance.id, auth.key.id, chat.stream);
  // One literal with every field, the observer too: a field added afterwards gave each request's
  // context a second shape and, past the literal's room, a property store of its own.
  const rc: RelayContext = {
    res,
    id: completionId(),
    model: chat.model,
    reqId: request.id,
    clock: ctx.clock,
    // Called once, when the exchange is over: it leaves the in-flight set then.
    // What the model server did not report is charged by estimate, and counted as such (the
    // receipt's estimatedTokens): a stream's completion as its content events, a plain answer
    // left by its client at the instance's pace.
    countTokens: (reportedPrompt, reportedCompletion, counted, reasoning, outcome) => {
      inflight.delete(relay);
      const prompt = reportedPrompt ?? estimatePromptTokens(bodyLength, media);
      const now = ctx.clock.now();
      let completion = reportedCompletion ?? counted;
      if (outcome === 'ok') live.tokensPerMs = learnPace(live.tokensPerMs, completion, now - sentAt);
      else if (outcome === 'disconnect' && !stream && reportedCompletion === null && counted === 0)
        completion = estimateCompletionTokens(live.tokensPerMs, now - sentAt, completionCap);
      const estimated = (reportedPrompt === null ? prompt : 0) + (reportedCompletion === null ? completion : 0);
      if (slot !== null) ctx.admission?.leave(slot);
      ctx.usage.finished(auth.key, { prompt, completion, reasoning, estimated, outcome });
      const tpm = auth.key.limits.tpm;
      if (tpm !== null) ctx.keyLimits.chargeTokens(auth.key.id, prompt + completion, now, tpm);
      live.tokens += completion;
      if (outcome === 'error') live.errors += 1;
      if (stream) live.openStreams -= 1;
      observer?.over(prompt, completion, reasoning, estimated);
      trace?.end(res.statusCode, prompt, completion, estimated, outcome);
    },
    limits: ctx.config,
    deadlines: ctx.deadlines,
    observer,
    headers: request.rateLimit,
    log: ctx.log,
    instance: auth.instance.id,
    key: auth.key.id,
    upstreamToken: ctx.upstreamTokens.get(auth.instance.id),
    trace,
  };
  const layouts = ctx.config.relayFastPath ? ctx.eventLayouts.for(auth.instance.deployment) : null;
  const relay = chat.stream
    ? new (trace === null ? StreamRelay : (ctx.tracing as Tracing).StreamRelay)(rc, chat.includeUsage, layouts)
    : new PlainRelay(rc);
  // In the turn the key was re-checked (recheck, above): from here a revocation ends it.
  inflight.add(auth.key, relay);
  try {
    ctx.upstream.dispatch(
      {
        endpoint: auth.instance.endpoint as string,
        body,
        stream: chat.stream,
        requestId: request.id,
        token: rc.upstreamToken,
        trace,
      },
      relay,
    );
  } catch (err) {
    // Answered, and out of the in-flight set, rather than a socket held until the client leaves.
    ctx.log.error({ err, reqId: request.id }, 'upstream request not sent');
    relay.terminate(obError('internal_error'));
  }
  return relay;
}
