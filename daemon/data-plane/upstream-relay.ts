import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { type ObProxyError, obError } from '../../src/errors.js';
import { type AnswerLimits, limitErrors } from '../../src/upstream/answer-limits.js';
import { translateUpstreamError, upstreamStatusError } from '../../src/upstream/upstream-errors.js';
import type { HeaderList } from '../../src/services/key-limiter.js';
import type { Deadlines } from './deadlines.js';
import type { UpstreamWatch, WatchedRelay } from './upstream-watch.js';
import type { ExchangeSink } from './exchange-sink.js';
import type { Terminable } from './inflight.js';
import type { RelayObserver, RelayTrace } from './relay-observer.js';
import type { CloseWatcher } from './close-watch.js';
import { writeRawError } from './send-error.js';

type Controller = Dispatcher.DispatchController;

/**
 * How one kind of answer reaches the client: a plain one collected and written once
 * (plain-relay.ts), a stream relayed read by read (stream-relay.ts). The relay carries the
 * exchange (undici's handler, the deadlines, the client's disconnect, the one report of the end;
 * the key's in-flight list holds the exchange's account, accounting.ts); its answer writes, and
 * tells the relay when it is over (`finish`).
 */
export interface RelayAnswer {
  /** Told the relay it writes for, when the relay is made. */
  attach(relay: Relay): void;
  /** A 200 arrived with these headers. */
  start(headers: IncomingHttpHeaders): void;
  /** A read of the 200's body. */
  data(chunk: Buffer): void;
  /** The 200's body ended. */
  end(): void;
  /** The client left; count what was produced. */
  gone(): void;
  /** The exchange failed with `err`: the client told, in the answer's shape. */
  failed(err: ObProxyError): void;
  /** The drain after a stream's end is over: count the exchange before the upstream is aborted. */
  drainEnded(): void;
}

export interface RelayContext {
  res: ServerResponse;
  /** Our completion id (Ollama's collide). */
  id: string;
  model: string;
  reqId: string;
  /** For `created` where the model server's answer lacks one. */
  clock: { now(): number };
  /** Told once, when the exchange is over, what to count (accounting.ts). */
  exchange: ExchangeSink;
  /** Bounds on the answer (the daemon's config). */
  limits: AnswerLimits;
  /** Where the response deadline is kept (one list for the daemon's requests). */
  deadlines: Deadlines;
  /** The exchange's place in that list and its watch on the model server's silence (upstream-watch.ts). */
  watch: UpstreamWatch;
  /** Told of the model server's response and failures (metrics); null when nobody listens. */
  observer: RelayObserver | null;
  /** More headers for the answer, whatever it is (the key's x-ratelimit-*). */
  headers?: HeaderList | null;
  /** Where a model server's failure is told (at warn), with the instance and key ids. */
  log: { warn(obj: object, msg: string): void };
  instance: string;
  key: string;
  /** The instance's token for its model server, if any: cleared from the errors passed on. */
  upstreamToken?: string | undefined;
  /**
   * Told when the model server answers that it has no such route (route-support.ts), instead of
   * the error being passed on; returns the error to answer. Null: errors pass on as they come.
   */
  routeMissing: ((status: number, type: string | undefined, body: string) => ObProxyError | null) | null;
  /**
   * Where the API has another way to the model server (proxied-route.ts `resend`): called, once
   * the relay has handed its exchange over, instead of answering the "no such route" of
   * `routeMissing`, which has reached no client yet. Null: the error is answered.
   */
  resend: (() => void) | null;
  /** The exchange's trace span (daemon/tracing/), told what only the relay sees; null: tracing off. */
  trace?: RelayTrace | null;
}

function contentType(headers: IncomingHttpHeaders): string | undefined {
  const v = headers['content-type'];
  return Array.isArray(v) ? v[0] : v;
}

/** The announced body length, or -1 (chunked, or not a number). */
export function contentLength(headers: IncomingHttpHeaders): number {
  const v = headers['content-length'];
  const n = typeof v === 'string' && v !== '' ? Number(v) : -1;
  return Number.isSafeInteger(n) ? n : -1;
}

/**
 * undici's dispatch handler, what both relays (plain-relay.ts, stream-relay.ts) share: the
 * client's disconnect aborts the upstream request (also when it comes before undici has started
 * it), an error status is collected and passed on in our shape, and `done` settles exactly once,
 * when the exchange is over. The answer is bounded (docs/contract.md
 * §3.6): a status other than 200 or an error, an error body past its cap, or an answer past its
 * deadline is refused with 502 upstream_error (one error event once a stream has begun) and the
 * upstream request aborted.
 */
export class Relay implements Dispatcher.DispatchHandler, WatchedRelay, Terminable, CloseWatcher {
  controller: Controller | null = null;
  clientGone = false;
  /** undici went on to write the request: from here the model server may have the prompt. */
  private sent = false;
  /** The client was answered with an error (the model server's, a refusal, a revocation). */
  errored = false;
  status = 0;
  private errorType: string | undefined;
  private errorBody: Buffer[] | null = null;
  private errorBytes = 0;
  private settled = false;
  /** After [DONE], the drain's deadline. */
  private drainTimer: NodeJS.Timeout | null = null;
  /** `done`, made only when asked for (the access log at info): most requests never need one. */
  private donePromise: Promise<void> | null = null;
  private resolveDone: (() => void) | null = null;

  /**
   * `answer`: how this API's answer is written (plain-relay.ts, stream-relay.ts); the relay is the
   * rest, the same for every API.
   */
  constructor(
    readonly c: RelayContext,
    private readonly answer: RelayAnswer,
  ) {
    answer.attach(this);
    // A resend's relay takes the watch over from the one that handed it on, with its own deadline.
    c.watch.relay = this;
    c.watch.quietMs = 0;
    c.deadlines.add(c.watch, c.limits.responseDeadlineMs);
    // A response closes once: one closed before its relay was made (the client left between its
    // body's end and the handler) is never heard of again, and would be relayed to no one.
    if (c.res.destroyed) this.clientClosed();
  }

  /** Settles when the exchange is over. */
  get done(): Promise<void> {
    this.donePromise ??= this.settled
      ? Promise.resolve()
      : new Promise<void>((r) => {
          this.resolveDone = r;
        });
    return this.donePromise;
  }

  /** The response deadline passed (deadlines.ts). */
  deadlinePassed(): void {
    this.refuse(limitErrors.tooSlow(this.c.limits.responseDeadlineMs), 'the response deadline passed');
  }

  /** The model server said nothing for `quietMs`: no headers in --upstream-timeout, or no read in the idle time. */
  silencePassed(): void {
    this.refuse(obError('upstream_timeout'), 'the model server was silent for too long');
  }

  /** Over a limit: answers the client (or ends its stream) with `err`, then aborts the upstream. */
  refuse(err: ObProxyError, why: string): void {
    if (this.settled) return;
    this.upstreamFailed(err.code);
    this.answer.failed(err);
    this.controller?.abort(new Error(why));
  }

  /** From now on the upstream gets `ms` more (the drain after [DONE]), not the whole deadline. */
  shortenDeadline(ms: number): void {
    if (this.settled) return;
    this.c.deadlines.remove(this.c.watch);
    if (this.drainTimer !== null) clearTimeout(this.drainTimer);
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null;
      this.drainOver();
    }, ms);
  }

  /** The drain after [DONE] is over (its time or its bytes): the exchange counted, the upstream request aborted. */
  drainOver(): void {
    this.answer.drainEnded();
    this.controller?.abort(new Error('the model server went on after [DONE]'));
  }

  /**
   * The client's socket closed (told by its exchange, accounting.ts): if before the answer was
   * written whole, the client went away.
   */
  clientClosed(): void {
    if (this.c.res.writableFinished) return;
    this.clientGone = true;
    this.controller?.abort(new Error('the client went away'));
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    if (this.clientGone) controller.abort(new Error('the client went away'));
    else if (this.settled) controller.abort(new Error('the exchange is over'));
    else {
      this.sent = true;
      // The request is being written: its answer's headers are due within --upstream-timeout.
      this.c.watch.quietMs = this.c.limits.upstreamTimeoutMs;
      this.c.watch.heard++;
    }
  }

  /**
   * Ends the exchange now, for a revocation or a pack end (docs/contract.md §3): an answer not begun is
   * `err` in our shape, a stream begun gets it as one error event and no [DONE]. Then the
   * upstream request is aborted (its connection closed, the model server's slot freed); undici's
   * error callback that follows finds the exchange settled and does nothing.
   */
  terminate(err: ObProxyError): void {
    if (this.settled) return;
    if (this.clientGone) this.answer.gone();
    else this.answer.failed(err);
    this.controller?.abort(err);
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: IncomingHttpHeaders): void {
    // 102 Processing, 103 Early Hints: undici hands over an informational response, then the
    // final one, which is the answer (RFC 9110 §15.2). Refused as "HTTP 103", a valid answer
    // behind it was lost. A server that sends them without end meets the response deadline.
    this.c.watch.heard++;
    if (statusCode < 200) return;
    this.c.watch.quietMs = this.c.limits.idleTimeoutMs;
    this.status = statusCode;
    this.c.observer?.responseStarted(statusCode);
    if (statusCode === 200) {
      this.answer.start(headers);
      return;
    }
    // 204, 304, 201 with a completion, a redirect: nothing a client could use, nor an error to pass on.
    if (statusCode < 400 || statusCode > 599) {
      this.refuse(limitErrors.badStatus(statusCode), `HTTP ${statusCode} from the model server`);
      return;
    }
    if (contentLength(headers) > this.c.limits.maxErrorBytes) {
      this.refuse(limitErrors.errorBodyTooLarge(statusCode, this.c.limits.maxErrorBytes), 'error body over the cap');
      return;
    }
    this.errorType = contentType(headers);
    this.errorBody = [];
  }

  // Kept small, as is StreamAnswer.data: undici's per-chunk path (onBody) is inlined into its
  // parser's callback only while what it calls leaves room in Turbofan's inlining budget; when
  // it did not, each chunk paid a megamorphic `socket.destroyed` (docs/performance.md).
  onResponseData(_controller: Controller, chunk: Buffer): void {
    this.c.watch.heard++;
    if (this.errorBody === null) this.answer.data(chunk);
    else this.errorData(chunk);
  }

  private errorData(chunk: Buffer): void {
    if (this.errorBody === null || this.settled) return;
    this.errorBytes += chunk.length;
    if (this.errorBytes > this.c.limits.maxErrorBytes) {
      this.errorBody = [];
      this.refuse(limitErrors.errorBodyTooLarge(this.status, this.c.limits.maxErrorBytes), 'error body over the cap');
      return;
    }
    this.errorBody.push(chunk);
  }

  onResponseEnd(): void {
    if (this.settled) return;
    if (this.errorBody !== null) {
      const text = Buffer.concat(this.errorBody).toString('utf8');
      const missing = this.c.routeMissing?.(this.status, this.errorType, text) ?? null;
      if (missing !== null && this.c.resend !== null) {
        this.handOver();
        this.c.resend();
        return;
      }
      if (missing === null) this.upstreamFailed('upstream_error');
      else this.errored = true;
      writeRawError(
        this.c.res,
        missing ?? upstreamStatusError(this.status, this.errorType, text, this.c.upstreamToken),
        this.c.reqId,
        this.c.headers,
      );
      this.finish(0, 0, 0);
      return;
    }
    this.answer.end();
  }

  /**
   * The exchange goes on in another relay (the request sent again another way, nothing of this
   * answer written): this one lets go of it without ending it (out of the deadlines; the
   * exchange keeps its place in flight and its close watch) and is settled, so that nothing it
   * hears later reaches the client or the exchange.
   */
  private handOver(): void {
    this.settled = true;
    this.c.deadlines.remove(this.c.watch);
    if (this.drainTimer !== null) clearTimeout(this.drainTimer);
    this.drainTimer = null;
  }

  onResponseError(_controller: Controller, err: Error): void {
    if (this.settled) return;
    if (this.clientGone) {
      this.answer.gone();
      return;
    }
    const e = translateUpstreamError(err);
    this.upstreamFailed(e.code);
    this.answer.failed(e);
  }

  /** The model server failed this exchange: counted against the key, told to the metrics. */
  upstreamFailed(code: string): void {
    this.errored = true;
    const c = this.c;
    c.trace?.error(code);
    c.log.warn({ reqId: c.reqId, instance: c.instance, key: c.key, code }, 'model server failed');
    c.observer?.upstreamFailed(code);
  }

  /**
   * `prompt`, `completion` null: the model server reported no such count (none, or not a token
   * count); `counted`: the completion as the relay counted it then.
   */
  finish(prompt: number | null, completion: number | null, reasoning: number, counted = 0): void {
    if (this.settled) return;
    this.settled = true;
    this.c.deadlines.remove(this.c.watch);
    if (this.drainTimer !== null) clearTimeout(this.drainTimer);
    this.drainTimer = null;
    // A model server that refused, or never answered, or was never sent the request (its client
    // left first) read no prompt: nothing to estimate.
    const hadPrompt = this.status === 200 || (this.clientGone && this.sent);
    this.c.exchange.ended(
      prompt ?? (hadPrompt ? null : 0),
      completion ?? (hadPrompt ? null : 0),
      counted,
      reasoning,
      this.clientGone ? 'disconnect' : this.errored ? 'error' : 'ok',
    );
    this.resolveDone?.();
  }
}

/**
 * The extra headers of an error answer: the key's x-ratelimit-*, and for a daemon out of sync with
 * its shared store the Retry-After its refusals on the headers give (auth-hook.ts).
 */
export function answerHeaders(err: ObProxyError, headers: HeaderList | null | undefined): HeaderList | null {
  if (err.code !== 'store_unreachable') return headers ?? null;
  return [...(headers ?? []), 'retry-after', '5'];
}
