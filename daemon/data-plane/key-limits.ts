import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyRecord } from '../../src/domain/key.js';
import { type ObProxyError, obError } from '../../src/errors.js';
import { type HeaderList, type KeyLimiter, type LimitName, retryAfterSeconds } from '../../src/services/key-limiter.js';
import type { DaemonBasics, KeyCheckDeps } from '../context.js';
import type { AuthContext } from './auth-context.js';
import { type HeldSlot, watchClose } from './close-watch.js';
import { replyError } from './send-error.js';

// The key's own limits on the request path: rpm and concurrency on its headers (`admitKey`), its
// tpm reserved once its body is read (`reserveTokens`) and charged when the exchange ends.

/** What the key's limits read: its windows, the time, and where a refusal is counted. */
export type KeyLimitDeps = Pick<KeyCheckDeps, 'keyLimits'> & Pick<DaemonBasics, 'clock' | 'metrics'>;

/** What a queue's refusal warns with. */
export type QueueWarnDeps = Pick<DaemonBasics, 'clock' | 'log' | 'config'>;

const WHAT: Record<LimitName, string> = {
  rpm: 'requests per minute',
  tpm: 'tokens per minute',
  concurrency: 'requests at once',
};

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The headers every answer to this request carries (names and values in turn): the key's
     * x-ratelimit-* and its pack's end (pack-headers.ts); null when it has neither.
     */
    rateLimit: HeaderList | null;
  }
}

/**
 * The key's own limits, right after it is authenticated (before the body is read: a refused
 * request costs nothing more). The x-ratelimit-* headers are kept on the request, and every
 * answer to it carries them: Fastify's (the data plane's onSend hook), and the relay's and the
 * hijacked errors, which write them with their own headers. Not `setHeader` on the response:
 * that cost several microseconds a request, because a response with headers set that way has
 * every header of its writeHead set one by one too.
 * Keys without limits pay one comparison. Returns false when the request was refused.
 */
export function admitKey(
  ctx: KeyLimitDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  key: KeyRecord,
  instance: string,
): boolean {
  const l = key.limits;
  if (l.rpm === null && l.tpm === null && l.concurrency === null) return true;
  // The pack's headers (set by the auth hook) go at the end of the key's list.
  const v = ctx.keyLimits.admit(key, ctx.clock.now(), request.rateLimit);
  request.rateLimit = v.headers;
  if (v.refused !== null) {
    ctx.metrics?.rateLimited(instance, v.refused);
    const limit = l[v.refused] as number;
    const wait = retryAfterSeconds(v.retryAfterMs);
    // One line when a key starts being refused, not one per refusal (the metrics count them all).
    if (v.report)
      request.log.info(
        { reqId: request.id, key: key.id, instance, limit: v.refused, value: limit, retryAfterS: wait },
        'key over its limit: refusing its requests with 429 until the window ends',
      );
    replyError(reply, overLimit(v.refused, limit, v.retryAfterMs), retryHeaders(v.retryAfterMs), { key: key.id });
    return false;
  }
  // 'close' comes once, whether the answer was sent or the client left; a relay that takes over
  // the response gives the slot back then, or when its exchange is over if that is first
  // (close-watch.ts).
  if (v.entered) watchClose(reply.raw, new KeySlot(ctx.keyLimits, key.id));
  return true;
}

/** The 429 of a key over one of its limits. */
export function overLimit(name: LimitName, limit: number, retryAfterMs: number): ObProxyError {
  return obError('rate_limited', {
    message: `This API key is over its limit of ${limit} ${WHAT[name]} (${name}). Retry in ${retryAfterSeconds(retryAfterMs)} s; the operator sets it with \`ob-proxy keys limit\`.`,
  });
}

/** A request's place in its key's concurrency count: given back once, whoever asks first. */
class KeySlot implements HeldSlot {
  private held = true;

  constructor(
    private readonly limiter: KeyLimiter,
    private readonly keyId: string,
  ) {}

  clientClosed(): void {
    this.release();
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.limiter.leave(this.keyId);
  }
}

/** Retry-After in whole seconds, and the exact wait for clients that read retry-after-ms (the OpenAI SDKs). */
export function retryHeaders(ms: number): Record<string, string> {
  return { 'retry-after': String(retryAfterSeconds(ms)), 'retry-after-ms': String(Math.max(1, Math.ceil(ms))) };
}

/** The 429 of an instance's admission queue. */
/** One warning per instance and reason per minute at most: a busy instance must not fill the disk. */
const QUIET_MS = 60_000;
const warned = new WeakMap<QueueWarnDeps, Map<string, number>>();

export function warnQueueRefusal(ctx: QueueWarnDeps, reason: 'queue_full' | 'queue_timeout', instance: string): void {
  let m = warned.get(ctx);
  if (m === undefined) warned.set(ctx, (m = new Map()));
  const id = `${instance} ${reason}`;
  const now = ctx.clock.now();
  if (now - (m.get(id) ?? Number.NEGATIVE_INFINITY) < QUIET_MS) return;
  m.set(id, now);
  ctx.log.warn(
    { instance, code: 'rate_limited', reason, maxConcurrency: ctx.config.maxConcurrency, queue: ctx.config.queueSize },
    `instance busy (${reason === 'queue_full' ? 'its queue is full' : 'a request waited past --queue-timeout'}): refusing with 429; raise --max-concurrency or --queue if the model server can take more`,
  );
}

export function queueRefusal(
  reason: 'queue_full' | 'queue_timeout',
  instance: string,
  timeoutMs: number,
): ObProxyError {
  return obError('rate_limited', {
    message:
      reason === 'queue_full'
        ? `The deployment "${instance}" is busy: its queue is full. Retry shortly.`
        : `The deployment "${instance}" is busy: the request waited ${timeoutMs / 1000} s in its queue without a turn. Retry shortly.`,
  });
}

/**
 * The tokens a request's answer may take, reserved against its key's tpm once its body is read
 * (KeyLimiter.reserve): a key at its tpm, counting what its answers under way reserved, is refused
 * with 429, so a burst of requests sent at once is bounded by their reservations. Given back once:
 * when the exchange is counted (`settleTokens`, which charges its real usage instead), or when its
 * response closes without one (refused, timed out in the queue, its client gone).
 */
class Reserved {
  constructor(
    private readonly limiter: KeyLimiter,
    private readonly keyId: string,
    private tokens: number,
  ) {}

  release(): void {
    this.limiter.release(this.keyId, this.tokens);
    this.tokens = 0;
  }
}

const RESERVED = Symbol('reserved tokens');
type ReservingResponse = ServerResponse & { [RESERVED]?: Reserved | null };

/** One listener for every response (no closure per request). */
function releaseReserved(this: ReservingResponse): void {
  const r = this[RESERVED];
  if (r == null) return;
  this[RESERVED] = null;
  r.release();
}

/**
 * Before the request waits or is sent: `prompt`, the estimate of its prompt's tokens
 * (prompt-estimate.ts), and `cap`, its completion's cap as the model server is sent it (null: none).
 * Answers the refusal and returns false when the key is at its tpm; keys without one pass at once.
 */
export function reserveTokens(
  ctx: KeyLimitDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  prompt: number,
  cap: number | null,
): boolean {
  const { key, instance } = request.auth as AuthContext;
  const tpm = key.limits.tpm;
  if (tpm === null) return true;
  const r = ctx.keyLimits.reserve(key, prompt, cap, ctx.clock.now());
  request.rateLimit = r.headers;
  if (r.refused) {
    ctx.metrics?.rateLimited(instance.id, 'tpm');
    replyError(reply, overLimit('tpm', tpm, r.retryAfterMs), retryHeaders(r.retryAfterMs), { key: key.id });
    return false;
  }
  if (r.tokens > 0) {
    const res = reply.raw as ReservingResponse;
    res[RESERVED] = new Reserved(ctx.keyLimits, key.id, r.tokens);
    res.on('close', releaseReserved);
  }
  return true;
}

/**
 * The exchange is over and counted: its reservation is given back, and `tokens`, what it took,
 * charged against the key's tpm, if it has one.
 */
export function settleTokens(
  ctx: Pick<KeyCheckDeps, 'keyLimits'>,
  res: ServerResponse,
  key: KeyRecord,
  tokens: number,
  now: number,
): void {
  releaseReserved.call(res as ReservingResponse);
  const tpm = key.limits.tpm;
  if (tpm !== null) ctx.keyLimits.chargeTokens(key.id, tokens, now, tpm);
}
