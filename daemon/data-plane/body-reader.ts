import type { ServerResponse } from 'node:http';
import { type FastifyReply, type FastifyRequest, errorCodes } from 'fastify';
import { type ObProxyError, obError } from '../../src/errors.js';
import type { ByteBudget, ByteRefusal } from '../../src/services/byte-budget.js';
import type { DaemonBasics, ExchangeDeps } from '../context.js';
import type { AuthContext } from './auth-context.js';
import type { DeadlineNode } from './deadlines.js';
import { retryHeaders } from './key-limits.js';
import { replyError } from './send-error.js';

// A request's body on its way in: held in the daemon's byte budget as it arrives, ended when it
// stops arriving, and read into one buffer (`makeBodyReader`).

/**
 * A request's body in the daemon's byte budget (src/services/byte-budget.ts): held as its bytes
 * arrive (a length announced holds nothing), given back once, when its response closes: the
 * answer is written whole, or its client left (a relay aborts the upstream request then, and
 * with it undici's copy of the body). Every route that reads a body gets it from the auth hook;
 * nothing else needs calling.
 */
class HeldBody {
  bytes = 0;

  constructor(
    private readonly budget: ByteBudget,
    readonly key: string,
    readonly instance: string,
  ) {}

  grow(n: number): ByteRefusal | null {
    const refused = this.budget.take(this.key, this.instance, n);
    if (refused === null) this.bytes += n;
    return refused;
  }

  release(): void {
    this.budget.give(this.key, this.instance, this.bytes);
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

/** What a body's hold and read touch: the byte budget, the reads' silence list, and the basics. */
export type BodyDeps = DaemonBasics & Pick<ExchangeDeps, 'bodies' | 'bodyReads'>;

function refusal(ctx: BodyDeps, held: HeldBody, why: ByteRefusal): BodyRefusal {
  const budget = ctx.bodies;
  ctx.metrics?.rateLimited(held.instance, why === 'daemon' ? 'body_memory_full' : 'body_memory');
  if (why === 'key') {
    return new BodyRefusal(
      obError('rate_limited', {
        message: `This API key already has ${mib(budget.heldBy(held.key))} of request bodies in flight, its share of the proxy's memory (${mib(budget.keyMax)}, --body-memory-per-key). Retry when some of its requests are over, or send fewer or smaller requests at once.`,
      }),
      retryHeaders(1000),
    );
  }
  if (why === 'instance') {
    return new BodyRefusal(
      obError('rate_limited', {
        message: `The keys of this API key's instance already have ${mib(budget.heldFor(held.instance))} of request bodies in flight, the instance's share of the proxy's memory (${mib(budget.instanceMax)}, --body-memory-per-instance). Retry when some of its requests are over, or send fewer or smaller requests at once.`,
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
const warnedAt = new WeakMap<BodyDeps, number>();
function warnFull(ctx: BodyDeps): void {
  const now = ctx.clock.now();
  if (now - (warnedAt.get(ctx) ?? Number.NEGATIVE_INFINITY) < 60_000) return;
  warnedAt.set(ctx, now);
  ctx.log.warn(
    { code: 'proxy_overloaded', held: ctx.bodies.held, bodyMemory: ctx.bodies.daemonMax },
    'request bodies held at --body-memory: refusing new bodies with 503 until some answers are over; raise --body-memory if the host has the memory',
  );
}

/**
 * In the auth hook, once the key has passed its limits: refuses a body announced that would not
 * fit as things stand (429 for the key's or its instance's share, 503 for the daemon's), before
 * any of it is read, and holds nothing for it: its bytes are held as they arrive (the reader).
 * The connection is closed under the unread body (unread-body.ts). A body announced past
 * --body-limit is left to its 413. Returns false when refused.
 */
export function holdBody(ctx: BodyDeps, request: FastifyRequest, reply: FastifyReply, key: string): boolean {
  const headers = request.headers;
  const length = headers['content-length'];
  if (length === undefined && headers['transfer-encoding'] === undefined) return true;
  const held = new HeldBody(ctx.bodies, key, (request.auth as AuthContext).instance.id);
  if (length !== undefined) {
    const n = Number(length);
    const why = n > 0 && n <= ctx.config.bodyLimit ? ctx.bodies.wouldRefuse(key, held.instance, n) : null;
    if (why !== null) {
      const r = refusal(ctx, held, why);
      replyError(reply, r.err, { ...r.headers, connection: 'close' }, { key });
      return false;
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
export function holdOnlyUpstreamBytes(request: FastifyRequest, upstream: Buffer | string): Buffer {
  const bytes = typeof upstream === 'string' ? Buffer.from(upstream) : upstream;
  if (bytes !== request.body) request.body = undefined;
  return bytes;
}

/** The data plane's error handler: answers a body the reader refused (past a bound, or stalled); false for any other error. */
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
 * announced length, made when the first byte comes and each chunk copied in as it arrives and
 * let go at once. Fastify's kept every chunk of every body still arriving and then copied them
 * into a second buffer: twice each body while it was read, and the chunks (64 KiB each) left the
 * allocator fragmented long after. A body of unknown length (chunked) is gathered and joined.
 * Each chunk is held in the byte budget as it arrives: past a bound the read fails with the
 * refusal, which the data plane's error handler answers (answerBodyRefusal). A body whose first
 * byte does not come within OB_PROXY_BODY_TIMEOUT of the read's start, or whose next byte does
 * not come within it of the last, is ended with 408 and its connection closed: a client that
 * announces bodies and sends nothing (or a byte now and then) holds a connection seconds, not
 * the whole request time-out.
 */
export function makeBodyReader(ctx: BodyDeps) {
  const limit = ctx.config.bodyLimit;
  return function readBody(request: FastifyRequest, payload: Payload, done: Done): void {
    const declared = request.headers['content-length'];
    const length = declared === undefined ? Number.NaN : Number(declared);
    if (length > limit) {
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    const read = new BodyRead(ctx, request.heldBody, payload, done, Number.isSafeInteger(length) ? length : -1);
    payload.on('data', read.onData);
    payload.on('end', read.onEnd);
    payload.on('error', read.onEnd);
    ctx.bodyReads.add(read, NEVER);
    payload.resume();
  };
}

// The whole request's time-out is Node's (requestTimeout): a body's place in the sweep is for
// its silences alone.
const NEVER = 1e15;

/** One body being read: its bytes so far, and its place in the sweep of silent bodies (deadlines.ts). */
class BodyRead implements DeadlineNode {
  dueAt = 0;
  prevDue: DeadlineNode | null = null;
  nextDue: DeadlineNode | null = null;
  heard = 0;
  quietMs: number;
  // Unlike heard: the first sweep starts the silence, so the first byte is waited for as long as the next.
  heardSeen = -1;
  quietSince = 0;
  private whole: Buffer | null = null;
  private chunks: Buffer[] | null = null;
  private received = 0;

  constructor(
    private readonly ctx: BodyDeps,
    private readonly held: HeldBody | null,
    private readonly payload: Payload,
    private readonly done: Done,
    /** The announced length; -1: none (chunked). */
    private readonly length: number,
  ) {
    this.quietMs = ctx.config.bodyTimeoutMs;
  }

  readonly onData = (chunk: Buffer | string): void => {
    this.heard++;
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const end = this.received + bytes.length;
    const limit = this.ctx.config.bodyLimit;
    if (end > limit || (this.payload.receivedEncodedLength ?? 0) > limit) {
      this.fail(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    if (this.held !== null) {
      const why = this.held.grow(bytes.length);
      if (why !== null) {
        const r = refusal(this.ctx, this.held, why);
        REFUSALS.set(r.err, r);
        this.fail(r.err);
        return;
      }
    }
    if (this.length < 0) (this.chunks ??= []).push(bytes);
    else if (end > this.length) {
      this.fail(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      return;
    } else bytes.copy((this.whole ??= Buffer.allocUnsafe(this.length)), this.received);
    this.received = end;
  };

  readonly onEnd = (err?: Error & { statusCode?: number }): void => {
    if (err != null) {
      if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
      this.fail(err);
      return;
    }
    if (this.length >= 0 && this.received !== this.length) {
      this.fail(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      return;
    }
    this.stop();
    this.done(
      null,
      this.length >= 0 ? (this.whole ?? Buffer.alloc(0)) : Buffer.concat(this.chunks ?? [], this.received),
    );
  };

  deadlinePassed(): void {
    this.silencePassed();
  }

  /** From the sweep, out of its list already: the body stopped arriving. */
  silencePassed(): void {
    const err = obError('request_timeout', {
      message: `The request body stopped arriving: none of it came for ${this.quietMs / 1000} s (OB_PROXY_BODY_TIMEOUT). Send the whole body at once.`,
    });
    REFUSALS.set(err, new BodyRefusal(err, {}));
    this.fail(err);
  }

  private fail(err: Error): void {
    this.stop();
    this.done(err);
  }

  private stop(): void {
    const p = this.payload;
    p.removeListener('data', this.onData);
    p.removeListener('end', this.onEnd);
    p.removeListener('error', this.onEnd);
    this.ctx.bodyReads.remove(this);
  }
}
