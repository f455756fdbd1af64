import type { ServerResponse } from 'node:http';
import { type FastifyReply, type FastifyRequest, errorCodes } from 'fastify';
import { type ObProxyError, obError } from '../../src/errors.js';
import type { ByteBudget, ByteRefusal } from '../../src/services/byte-budget.js';
import type { DaemonContext } from '../context.js';
import { retryHeaders } from './key-limits.js';
import { replyError } from './send-error.js';

// A request's body on its way in: held in the daemon's byte budget, counted as it arrives, and
// read into one buffer (`makeBodyReader`).

/**
 * A request's body in the daemon's byte budget (src/services/byte-budget.ts): held from the
 * moment it is announced (Content-Length, before a byte is read) or as its chunks arrive (a
 * chunked body), given back once, when its response closes: the answer is written whole, or its
 * client left (a relay aborts the upstream request then, and with it undici's copy of the body).
 * Every route that reads a body gets it from the auth hook; nothing else needs calling.
 */
class HeldBody {
  bytes = 0;

  constructor(
    private readonly budget: ByteBudget,
    readonly key: string,
  ) {}

  grow(n: number): ByteRefusal | null {
    const refused = this.budget.take(this.key, n);
    if (refused === null) this.bytes += n;
    return refused;
  }

  release(): void {
    this.budget.give(this.key, this.bytes);
    this.bytes = 0;
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The body's bytes in the byte budget (holdBody), for the reader to count a chunked one. */
    heldBody: HeldBody | null;
  }
}

const HELD = Symbol('held body');
type HoldingResponse = ServerResponse & { [HELD]?: HeldBody | null };

/** One listener for every response (no closure per request): gives its body's bytes back. */
function releaseHeld(this: HoldingResponse): void {
  const held = this[HELD];
  if (held == null) return;
  this[HELD] = null;
  held.release();
}

/** The answer to a body past a bound, and its headers. */
class BodyRefusal {
  constructor(
    readonly err: ObProxyError,
    readonly headers: Record<string, string>,
  ) {}
}
const REFUSALS = new WeakMap<object, BodyRefusal>();

function refusal(ctx: DaemonContext, held: HeldBody, why: ByteRefusal, instance: string): BodyRefusal {
  const budget = ctx.bodies;
  ctx.metrics?.rateLimited(instance, why === 'key' ? 'body_memory' : 'body_memory_full');
  if (why === 'key') {
    return new BodyRefusal(
      obError('rate_limited', {
        message: `This API key already has ${mib(budget.heldBy(held.key))} of request bodies in flight, its share of the proxy's memory (${mib(budget.keyMax)}, --body-memory-per-key). Retry when some of its requests are over, or send fewer or smaller requests at once.`,
      }),
      retryHeaders(1000),
    );
  }
  warnFull(ctx);
  return new BodyRefusal(obError('proxy_overloaded'), { 'retry-after': '1' });
}

/** A byte count as a person reads it: MiB, or KiB below one (a small share read "0.0 MiB"). */
function mib(n: number): string {
  return n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`;
}

/** One warning a minute at most: a daemon at its bound must not fill the disk. */
const warnedAt = new WeakMap<DaemonContext, number>();
function warnFull(ctx: DaemonContext): void {
  const now = ctx.clock.now();
  if (now - (warnedAt.get(ctx) ?? Number.NEGATIVE_INFINITY) < 60_000) return;
  warnedAt.set(ctx, now);
  ctx.log.warn(
    { code: 'proxy_overloaded', held: ctx.bodies.held, bodyMemory: ctx.bodies.daemonMax },
    'request bodies held at --body-memory: refusing new bodies with 503 until some answers are over; raise --body-memory if the host has the memory',
  );
}

/**
 * In the auth hook, once the key has passed its limits: holds the announced body, or answers the
 * refusal (429 for the key's share, 503 for the daemon's) before any of it is read; the
 * connection is then closed under the unread body (unread-body.ts). A body announced past
 * --body-limit is left to its 413. Returns false when refused.
 */
export function holdBody(ctx: DaemonContext, request: FastifyRequest, reply: FastifyReply, key: string): boolean {
  const headers = request.headers;
  const length = headers['content-length'];
  if (length === undefined && headers['transfer-encoding'] === undefined) return true;
  const held = new HeldBody(ctx.bodies, key);
  if (length !== undefined) {
    const n = Number(length);
    if (n > 0 && n <= ctx.config.bodyLimit) {
      const why = held.grow(n);
      if (why !== null) {
        const r = refusal(ctx, held, why, (request.auth as { instance: { id: string } }).instance.id);
        replyError(reply, r.err, { ...r.headers, connection: 'close' }, key);
        return false;
      }
    }
  }
  request.heldBody = held;
  const res = reply.raw as HoldingResponse;
  res[HELD] = held;
  res.on('close', releaseHeld);
  return true;
}

/**
 * Hold each body once: what a request keeps while it waits for its turn or its answer is the
 * bytes it sends upstream, and nothing else of its body. The parsed request (its API's
 * `upstream` lets go of a rewritten tree once it is bytes) and the client's raw bytes, when the upstream body is another buffer, are let
 * go; a rewritten body is kept as UTF-8 bytes (undici would make them of the string anyway), not
 * as a string of up to twice its size. A 15 MiB body waiting held about 22 MiB of RSS before.
 */
export function keepOneCopy(request: FastifyRequest, upstream: Buffer | string): Buffer {
  const bytes = typeof upstream === 'string' ? Buffer.from(upstream) : upstream;
  if (bytes !== request.body) request.body = undefined;
  return bytes;
}

/** The data plane's error handler: answers a chunked body refused by the reader; false for any other error. */
export function answerBodyRefusal(reply: FastifyReply, error: unknown): boolean {
  const r = typeof error === 'object' && error !== null ? REFUSALS.get(error) : undefined;
  if (r === undefined) return false;
  replyError(reply, r.err, { ...r.headers, connection: 'close' });
  return true;
}

type Payload = NodeJS.ReadableStream & { receivedEncodedLength?: number };
type Done = (err: Error | null, body?: Buffer) => void;

/**
 * Reads a request body as bytes, up to --body-limit, as Fastify's own reader does (the same 413
 * and length errors, answered by the data plane's error handler), but into one buffer of the
 * announced length, each chunk copied in as it arrives and let go at once. Fastify's kept every
 * chunk of every body still arriving and then copied them into a second buffer: twice each body
 * while it was read, and the chunks (64 KiB each) left the allocator fragmented long after.
 * A body of unknown length (chunked) is gathered and joined, each chunk held in the byte budget
 * as it arrives (a body with a Content-Length was held whole by holdBody): past a bound the read
 * fails with the refusal, which the data plane's error handler answers (answerBodyRefusal).
 */
export function makeBodyReader(ctx: DaemonContext) {
  const limit = ctx.config.bodyLimit;
  return function readBody(request: FastifyRequest, payload: Payload, done: Done): void {
    const declared = request.headers['content-length'];
    const length = declared === undefined ? Number.NaN : Number(declared);
    if (length > limit) {
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    const whole = Number.isSafeInteger(length) && length >= 0 ? Buffer.allocUnsafe(length) : null;
    const held = declared === undefined ? request.heldBody : null;
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (): void => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onEnd);
    };
    function onData(chunk: Buffer | string): void {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      const end = received + bytes.length;
      if (end > limit || (payload.receivedEncodedLength ?? 0) > limit) {
        stop();
        done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      if (held !== null) {
        const why = held.grow(bytes.length);
        if (why !== null) {
          stop();
          const r = refusal(ctx, held, why, (request.auth as { instance: { id: string } }).instance.id);
          REFUSALS.set(r.err, r);
          done(r.err);
          return;
        }
      }
      if (whole === null) chunks.push(bytes);
      else if (end > whole.length) {
        stop();
        done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        return;
      } else bytes.copy(whole, received);
      received = end;
    }
    function onEnd(err?: Error & { statusCode?: number }): void {
      stop();
      if (err != null) {
        if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
        done(err);
        return;
      }
      if (whole !== null && received !== whole.length) {
        done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        return;
      }
      done(null, whole ?? Buffer.concat(chunks, received));
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onEnd);
    payload.resume();
  };
}
