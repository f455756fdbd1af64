import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { type ObProxyError, obError } from '../../src/errors.js';
import { encodeJson, normalizeCompletion, usageOf } from '../../src/wire/chat-response.js';
import { spliceCompletionId } from '../../src/wire/completion-splice.js';
import { OutputBatch } from '../../src/wire/output-batch.js';
import type { InvalidReason } from '../../src/wire/sse-relay.js';
import { type AnswerLimits, DRAIN_BYTES, DRAIN_MS, limitErrors } from '../../src/upstream/answer-limits.js';
import { translateUpstreamError, upstreamStatusError } from '../../src/upstream/upstream-errors.js';
import type { HeaderList } from '../../src/services/key-limiter.js';
import type { DeadlineNode, Deadlines } from './deadlines.js';
import type { ExchangeSink } from './exchange-end.js';
import type { InflightEntry, InflightNode } from './inflight.js';
import { type CloseWatcher, type HeldSlot, handBackClose, unwatchClose, watchClose } from './close-watch.js';
import { jsonHeaders, streamHeaders, writeRawError } from './send-error.js';

type Controller = Dispatcher.DispatchController;

export interface RelayContext {
  res: ServerResponse;
  /** Our completion id (Ollama's collide). */
  id: string;
  model: string;
  reqId: string;
  /** For `created` where the model server's answer lacks one. */
  clock: { now(): number };
  /** Told once, when the exchange is over, what to count (exchange-end.ts). */
  exchange: ExchangeSink;
  /** Bounds on the answer (the daemon's config). */
  limits: AnswerLimits;
  /** Where the response deadline is kept (one list for the daemon's requests). */
  deadlines: Deadlines;
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

/** What the relay tells a trace span: a plain answer's body, and the exchange's error code. */
export interface RelayTrace {
  answer(body: Record<string, unknown>): void;
  error(code: string): void;
}

/**
 * What turns a model server's event stream into the client's, read by read: chat's SseRelay,
 * the Responses API's ResponsesStreamRelay.
 */
export interface EventStream {
  pushInto(chunk: Buffer, out: OutputBatch): void;
  /** Nothing more is forwarded: the end, an error event, or something refused. */
  readonly stopped: boolean;
  /** The stream's own end came (`[DONE]`, `response.completed`). */
  readonly done: boolean;
  /** The model server's error event was forwarded, the client's last. */
  readonly sawError: boolean;
  readonly invalid: boolean;
  readonly invalidReason: InvalidReason | null;
  /** Content events seen: the completion when the model server reports none. */
  readonly contentChunks: number;
  /** The model server's counts, where they are token counts. */
  counts(): { prompt: number | null; completion: number | null; reasoning: number };
  /** Our error event, in the stream's own shape, the client's last. */
  closingError(err: ObProxyError): string;
}

export interface RelayObserver {
  /** The model server's response headers arrived. */
  responseStarted(status: number): void;
  /** The exchange failed because of the model server (an `upstream_*` code). */
  upstreamFailed(code: string): void;
}

function contentType(headers: IncomingHttpHeaders): string | undefined {
  const v = headers['content-type'];
  return Array.isArray(v) ? v[0] : v;
}

/** The announced body length, or -1 (chunked, or not a number). */
function contentLength(headers: IncomingHttpHeaders): number {
  const v = headers['content-length'];
  const n = typeof v === 'string' && v !== '' ? Number(v) : -1;
  return Number.isSafeInteger(n) ? n : -1;
}

/**
 * What both relays share: the client's disconnect aborts the upstream request (also when it
 * comes before undici has started it), an error status is collected and passed on in our shape,
 * and `done` settles exactly once, when the exchange is over. The answer is bounded (docs/contract.md
 * §3.6): a status other than 200 or an error, an error body past its cap, or an answer past its
 * deadline is refused with 502 upstream_error (one error event once a stream has begun) and the
 * upstream request aborted.
 */
export abstract class Relay implements Dispatcher.DispatchHandler, DeadlineNode, InflightNode, CloseWatcher {
  protected controller: Controller | null = null;
  /** The key's concurrency slot, when it has limits: given back when the response closes or the exchange is over. */
  private readonly keySlot: HeldSlot | null;
  protected clientGone = false;
  /** undici went on to write the request: from here the model server may have the prompt. */
  private sent = false;
  /** The client was answered with an error (the model server's, a refusal, a revocation). */
  protected errored = false;
  protected status = 0;
  private errorType: string | undefined;
  private errorBody: Buffer[] | null = null;
  private errorBytes = 0;
  private settled = false;
  /** Its place in the response deadlines, and the model server's silence (deadlines.ts). */
  dueAt = 0;
  prevDue: DeadlineNode | null = null;
  nextDue: DeadlineNode | null = null;
  heard = 0;
  quietMs = 0;
  heardSeen = 0;
  quietSince = 0;
  /** Its place among its key's requests in flight (inflight.ts). */
  inflightEntry: InflightEntry | null = null;
  inflightPrev: InflightNode | null = null;
  inflightNext: InflightNode | null = null;
  /** After [DONE], the drain's deadline. */
  private drainTimer: NodeJS.Timeout | null = null;
  /** `done`, made only when asked for (the access log at info): most requests never need one. */
  private donePromise: Promise<void> | null = null;
  private resolveDone: (() => void) | null = null;

  constructor(protected readonly c: RelayContext) {
    // One listener for the response, shared by all (close-watch.ts).
    this.keySlot = watchClose(c.res, this);
    c.deadlines.add(this, c.limits.responseDeadlineMs);
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
  protected refuse(err: ObProxyError, why: string): void {
    if (this.settled) return;
    this.upstreamFailed(err.code);
    this.failed(err);
    this.controller?.abort(new Error(why));
  }

  /** From now on the upstream gets `ms` more (the drain after [DONE]), not the whole deadline. */
  protected shortenDeadline(ms: number): void {
    if (this.settled) return;
    this.c.deadlines.remove(this);
    if (this.drainTimer !== null) clearTimeout(this.drainTimer);
    this.drainTimer = setTimeout(() => {
      this.drainTimer = null;
      this.drainOver();
    }, ms);
  }

  /** The drain after [DONE] is over (its time or its bytes): the upstream request is aborted. */
  protected drainOver(): void {
    this.controller?.abort(new Error('the model server went on after [DONE]'));
  }

  /** The client's socket closed: if before the answer was written whole, the client went away. */
  clientClosed(): void {
    // The answer is written whole, or the client left: either way the key's slot is free again
    // (a stream's upstream may still be drained after [DONE]; that is not the key's request).
    this.keySlot?.release();
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
      this.quietMs = this.c.limits.upstreamTimeoutMs;
      this.heard++;
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
    if (this.clientGone) this.gone();
    else this.failed(err);
    this.controller?.abort(err);
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: IncomingHttpHeaders): void {
    // 102 Processing, 103 Early Hints: undici hands over an informational response, then the
    // final one, which is the answer (RFC 9110 §15.2). Refused as "HTTP 103", a valid answer
    // behind it was lost. A server that sends them without end meets the response deadline.
    this.heard++;
    if (statusCode < 200) return;
    this.quietMs = this.c.limits.idleTimeoutMs;
    this.status = statusCode;
    this.c.observer?.responseStarted(statusCode);
    if (statusCode === 200) {
      this.start(headers);
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

  // Kept small, as is StreamRelay.data: undici's per-chunk path (onBody) is inlined into its
  // parser's callback only while what it calls leaves room in Turbofan's inlining budget; when
  // it did not, each chunk paid a megamorphic `socket.destroyed` (docs/performance.md).
  onResponseData(_controller: Controller, chunk: Buffer): void {
    this.heard++;
    if (this.errorBody === null) this.data(chunk);
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
    this.end();
  }

  /**
   * The exchange goes on in another relay (the request sent again another way, nothing of this
   * answer written): this one lets go of it without ending it (out of the deadlines, the
   * response's close watch back to the key's slot) and is settled, so that nothing it hears
   * later reaches the client or the exchange.
   */
  private handOver(): void {
    this.settled = true;
    this.c.deadlines.remove(this);
    if (this.drainTimer !== null) clearTimeout(this.drainTimer);
    this.drainTimer = null;
    handBackClose(this.c.res, this.keySlot);
  }

  onResponseError(_controller: Controller, err: Error): void {
    if (this.settled) return;
    if (this.clientGone) {
      this.gone();
      return;
    }
    const e = translateUpstreamError(err);
    this.upstreamFailed(e.code);
    this.failed(e);
  }

  /** The model server failed this exchange: counted against the key, told to the metrics. */
  protected upstreamFailed(code: string): void {
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
  protected finish(prompt: number | null, completion: number | null, reasoning: number, counted = 0): void {
    if (this.settled) return;
    this.settled = true;
    this.c.deadlines.remove(this);
    if (this.drainTimer !== null) clearTimeout(this.drainTimer);
    this.drainTimer = null;
    unwatchClose(this.c.res);
    this.keySlot?.release();
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

  protected abstract start(headers: IncomingHttpHeaders): void;
  protected abstract data(chunk: Buffer): void;
  protected abstract end(): void;
  /** The client left; count what was produced. */
  protected abstract gone(): void;
  protected abstract failed(err: ObProxyError): void;
}

/** A non-streaming answer: collected, given our id and the shape of docs/contract.md §3.3, sent in one write. */
export class PlainRelay extends Relay {
  private chunks: Buffer[] = [];
  private bytes = 0;

  protected start(headers: IncomingHttpHeaders): void {
    if (contentLength(headers) > this.c.limits.maxAnswerBytes) this.tooLarge();
  }

  protected data(chunk: Buffer): void {
    if (this.bytes < 0) return;
    this.bytes += chunk.length;
    if (this.bytes > this.c.limits.maxAnswerBytes) this.tooLarge();
    else this.chunks.push(chunk);
  }

  private tooLarge(): void {
    this.bytes = -1;
    this.chunks = [];
    this.refuse(limitErrors.answerTooLarge(this.c.limits.maxAnswerBytes), 'answer over the cap');
  }

  protected end(): void {
    if (this.bytes < 0) return;
    const raw = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    this.chunks = [];
    const text = raw.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    this.answer(raw, text, parsed);
  }

  /** Writes the answer whose bytes are `raw` (`text` decoded, `parsed` its JSON or null): chat's shape (docs/contract.md §3.3). */
  protected answer(raw: Buffer, text: string, parsed: unknown): void {
    // Parsed once, for the shape check and usage; re-serialised only when the shape needs fixing.
    let out: Buffer | string | null = spliceCompletionId(raw, text, parsed, this.c.id);
    const body =
      out !== null
        ? (parsed as Record<string, unknown>)
        : normalizeCompletion(parsed, this.c.id, this.c.model, Math.floor(this.c.clock.now() / 1000));
    if (body === null) {
      this.failed(
        obError('upstream_error', {
          message: "The model server sent an answer that is not a chat completion. Check the instance's endpoint.",
        }),
      );
      return;
    }
    out ??= encodeJson(body);
    if (out === null) {
      this.upstreamFailed('upstream_error');
      this.failed(limitErrors.tooDeep(false));
      return;
    }
    const usage = usageOf(body);
    this.c.trace?.answer(body);
    this.c.res.writeHead(200, jsonHeaders(Buffer.byteLength(out), this.c.reqId, this.c.headers));
    this.c.res.end(out);
    this.finish(usage.prompt, usage.completion, usage.reasoning);
  }

  protected gone(): void {
    this.finish(null, null, 0);
  }

  protected failed(err: ObProxyError): void {
    this.errored = true;
    this.c.trace?.error(err.code);
    writeRawError(this.c.res, err, this.c.reqId, answerHeaders(err, this.c.headers));
    this.finish(null, null, 0);
  }
}

/**
 * A stream: each upstream read goes through the SSE relay and out in one write, as it came.
 * Back-pressure pauses the upstream until the client drains. The client's response ends at
 * [DONE] or at the upstream's error event; after [DONE] the rest of the upstream body is read
 * briefly (DRAIN_BYTES, DRAIN_MS) so its connection returns to the pool, then aborted.
 */
export class StreamRelay extends Relay {
  private readonly relay: EventStream;
  private waiting = false;
  private readonly pending = new OutputBatch();
  private scheduled = false;
  /** The 200 and its headers are written: failures are told with an error event from now on. */
  private begun = false;
  /** Bytes read after [DONE]. */
  private drained = 0;
  /** [DONE] came: the drain's deadline replaces the response's on the next microtask (`flushQueued`). */
  private drainDue = false;

  /** `events`: what turns this API's events into the client's (chat's SseRelay, made with the context's id and limits). */
  constructor(c: RelayContext, events: EventStream) {
    super(c);
    this.relay = events;
  }

  protected start(): void {
    this.begun = true;
    const res = this.c.res;
    res.writeHead(200, streamHeaders(this.c.reqId, this.c.headers));
    // The headers leave with the first chunk when it is already here (one write, not two); when
    // the model is slow to its first token, they leave on the next turn of the event loop.
    setImmediate(() => {
      if (!res.headersSent && !res.destroyed) res.flushHeaders();
    });
  }

  protected data(chunk: Buffer): void {
    const relay = this.relay;
    if (relay.stopped) {
      this.afterStop(chunk);
      return;
    }
    relay.pushInto(chunk, this.pending);
    if (this.pending.length > 0) this.schedule();
    if (relay.stopped) this.stopped();
  }

  /** A read after the relay stopped: after [DONE], drained up to DRAIN_BYTES. */
  private afterStop(chunk: Buffer): void {
    if (this.relay.done && (this.drained += chunk.length) > DRAIN_BYTES) this.drainOver();
  }

  /**
   * The client's stream ended whole at [DONE]: the exchange is counted as it went, then the
   * upstream request aborted (settled first, as in `stopped`). Aborted unsettled, a server that
   * kept its body open past the drain made a whole answer an error of the key's usage and an
   * `upstream_unavailable` in the log and the metrics.
   */
  protected override drainOver(): void {
    this.count();
    super.drainOver();
  }

  /** The read just processed stopped the relay: [DONE], an error event, or a refusal. */
  private stopped(): void {
    const relay = this.relay;
    this.flush();
    // Settled before the abort: undici calls onResponseError within abort(), which must find
    // the exchange over. Aborted first, the failure was told twice, the second time as
    // `upstream_unavailable` (the log and the metrics blamed the network for a refused event).
    if (relay.invalid) {
      this.upstreamFailed('upstream_error');
      this.endWithError(this.refusal());
      this.count();
      this.controller?.abort(new Error('an event from the model server was refused'));
    } else if (relay.sawError) {
      this.upstreamFailed('upstream_error');
      this.count();
      // Its error event was the client's last: nothing more to read.
      this.controller?.abort(new Error('the model server sent an error event'));
    } else {
      // The drain's timer is set on the microtask that follows, not now: when the upstream's
      // end came in the same read as [DONE] (the usual case), the exchange is over by then, and
      // a timer made and cleared in one turn was a Timeout and a closure per stream for nothing.
      this.drainDue = true;
      this.schedule();
    }
  }

  private refusal(): ObProxyError {
    const reason = this.relay.invalidReason;
    if (reason === 'frame_too_large') return limitErrors.frameTooLarge(this.c.limits.maxFrameBytes);
    if (reason === 'too_deep') return limitErrors.tooDeep(true);
    return reason === 'not_sse' ? limitErrors.notSse() : limitErrors.notJson();
  }

  /**
   * undici hands over every HTTP chunk of one socket read synchronously, and a model server
   * sends one chunk per token: gather their pieces and write them once (one copy), on a
   * microtask, before the next read. The order is kept and nothing waits past this turn.
   */
  private schedule(): void {
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.flushQueued);
    }
  }

  private readonly flushQueued = (): void => {
    this.scheduled = false;
    this.flush();
    if (this.drainDue) {
      this.drainDue = false;
      this.shortenDeadline(DRAIN_MS);
    }
  };

  private flush(): void {
    const res = this.c.res;
    if (this.pending.length === 0) return;
    const out = this.pending.take();
    if (this.relay.done || this.relay.sawError) {
      if (!res.writableEnded) res.end(out);
      return;
    }
    if (res.writableEnded) return;
    if (!res.write(out)) this.pauseUntilDrained();
  }

  private pauseUntilDrained(): void {
    if (this.waiting) return;
    const res = this.c.res;
    this.waiting = true;
    // A client that does not read is not the model server's silence (undici's time-out alike).
    this.quietMs = 0;
    this.controller?.pause();
    const resume = (): void => {
      res.off('drain', resume);
      res.off('close', resume);
      this.waiting = false;
      this.quietMs = this.c.limits.idleTimeoutMs;
      this.heard++;
      // After a disconnect the request is aborted: nothing to resume.
      if (!this.clientGone) this.controller?.resume();
    };
    res.on('drain', resume);
    res.on('close', resume);
  }

  protected end(): void {
    this.flush();
    if (!this.relay.done && !this.relay.sawError) {
      this.upstreamFailed('upstream_unavailable');
      this.endWithError(
        obError('upstream_unavailable', { message: 'The model server ended the stream before it was complete.' }),
      );
    } else if (!this.c.res.writableEnded) this.c.res.end();
    this.count();
  }

  protected gone(): void {
    this.count();
  }

  protected failed(err: ObProxyError): void {
    this.errored = true;
    this.c.trace?.error(err.code);
    this.flush();
    if (this.relay.invalid || this.relay.sawError) {
      this.count();
      return;
    }
    if (!this.begun) writeRawError(this.c.res, err, this.c.reqId, answerHeaders(err, this.c.headers));
    else if (!this.relay.done) this.endWithError(err);
    this.count();
  }

  /** The model server's counts where they are token counts; else the completion is the content events. */
  private count(): void {
    const u = this.relay.counts();
    this.finish(u.prompt, u.completion, u.reasoning, this.relay.contentChunks);
  }

  /** After a 200 has been sent, the only way to say "failed": one error event, no [DONE]. */
  private endWithError(err: ObProxyError): void {
    const res = this.c.res;
    if (res.writableEnded) return;
    const e =
      err.code === 'upstream_timeout'
        ? obError('upstream_timeout', { message: 'The model server sent nothing for too long; the stream was ended.' })
        : err;
    res.end(this.relay.closingError(e));
  }
}

/**
 * The extra headers of an error answer: the key's x-ratelimit-*, and for a daemon out of sync with
 * its shared store the Retry-After its refusals on the headers give (auth-hook.ts).
 */
function answerHeaders(err: ObProxyError, headers: HeaderList | null | undefined): HeaderList | null {
  if (err.code !== 'store_unreachable') return headers ?? null;
  return [...(headers ?? []), 'retry-after', '5'];
}
