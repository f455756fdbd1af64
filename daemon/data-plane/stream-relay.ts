import { type ObProxyError, obError } from '../../src/errors.js';
import { OutputBatch } from '../../src/wire/output-batch.js';
import { DRAIN_BYTES, DRAIN_MS, limitErrors } from '../../src/upstream/answer-limits.js';
import type { InvalidReason } from '../../src/wire/sse-relay.js';
import { type Relay, type RelayAnswer, answerHeaders } from './upstream-relay.js';
import { streamHeaders, writeRawError } from './send-error.js';

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

/** How a stream's answer is framed: Server-Sent Events, or Ollama's JSON lines (`application/x-ndjson`). */
export type StreamFormat = 'sse' | 'ndjson';

/** Ollama's content type for a stream; its lines are JSON objects, one a line. */
const NDJSON_HEAD = ['content-type', 'application/x-ndjson', 'cache-control', 'no-cache', 'x-accel-buffering', 'no'];
const NEWLINE = Buffer.from('\n');

/**
 * A stream: each upstream read goes through the API's event relay and out in one write, as it came.
 * Back-pressure pauses the upstream until the client drains. The client's response ends at
 * [DONE] or at the upstream's error event; after [DONE] the rest of the upstream body is read
 * briefly (DRAIN_BYTES, DRAIN_MS) so its connection returns to the pool, then aborted.
 */
export class StreamAnswer implements RelayAnswer {
  private r!: Relay;
  private relay: EventStream;
  private waiting = false;
  private readonly pending = new OutputBatch();
  private scheduled = false;
  /** The 200 and its headers are written: failures are told with an error event from now on. */
  private begun = false;
  /** Bytes read after [DONE]. */
  private drained = 0;

  /**
   * `events`: what turns this API's events into the client's (chat's SseRelay, made with the
   * context's id and limits). `format` ndjson: Ollama's content type, its headers leaving with
   * the first line as Ollama sends them, and the body's end completing a last line left without
   * its newline (a model-load answer is one bare object). `traced`: whether the exchange's trace
   * span, if any, reads the stream (daemon/tracing/stream-facts.ts).
   */
  constructor(
    events: EventStream,
    private readonly format: StreamFormat = 'sse',
    /** Whether its reads are the trace's to read: not a translated stream's, in another API's words. */
    private readonly traced = true,
  ) {
    this.relay = events;
  }

  attach(r: Relay): void {
    this.r = r;
    // A traced exchange's reads pass its span first; an untraced one's per-read path stays as
    // small as it was (upstream-relay.ts `onResponseData` says why that matters).
    const trace = r.c.trace;
    if (this.traced && trace != null) this.relay = new TappedEvents(this.relay, trace);
  }

  start(): void {
    this.begun = true;
    const c = this.r.c;
    const res = c.res;
    if (this.format === 'ndjson') {
      res.writeHead(200, [...(c.headers ?? []), ...NDJSON_HEAD, 'x-request-id', c.reqId]);
      return;
    }
    res.writeHead(200, streamHeaders(c.reqId, c.headers));
    // The headers leave with the first chunk when it is already here (one write, not two); when
    // the model is slow to its first token, they leave on the next turn of the event loop.
    setImmediate(() => {
      if (!res.headersSent && !res.destroyed) res.flushHeaders();
    });
  }

  data(chunk: Buffer): void {
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
    if (this.relay.done && (this.drained += chunk.length) > DRAIN_BYTES) this.r.drainOver();
  }

  /**
   * The client's stream ended whole at [DONE]: the exchange is counted as it went, then the
   * upstream request aborted (settled first, as in `stopped`). Aborted unsettled, a server that
   * kept its body open past the drain made a whole answer an error of the key's usage and an
   * `upstream_unavailable` in the log and the metrics.
   */
  drainEnded(): void {
    this.count();
  }

  /** The read just processed stopped the relay: [DONE], an error event, or a refusal. */
  private stopped(): void {
    const relay = this.relay;
    this.flush();
    // Settled before the abort: undici calls onResponseError within abort(), which must find
    // the exchange over. Aborted first, the failure was told twice, the second time as
    // `upstream_unavailable` (the log and the metrics blamed the network for a refused event).
    if (relay.invalid) {
      this.r.upstreamFailed('upstream_error');
      this.endWithError(this.refusal());
      this.count();
      this.r.controller?.abort(new Error('an event from the model server was refused'));
    } else if (relay.sawError) {
      this.r.upstreamFailed('upstream_error');
      this.count();
      // Its error event was the client's last: nothing more to read.
      this.r.controller?.abort(new Error('the model server sent an error event'));
    } else this.r.shortenDeadline(DRAIN_MS);
  }

  private refusal(): ObProxyError {
    const reason = this.relay.invalidReason;
    if (reason === 'frame_too_large') return limitErrors.frameTooLarge(this.r.c.limits.maxFrameBytes);
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
  };

  private flush(): void {
    const res = this.r.c.res;
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
    const res = this.r.c.res;
    this.waiting = true;
    // A client that does not read is not the model server's silence (undici's time-out alike).
    this.r.c.watch.quietMs = 0;
    this.r.controller?.pause();
    const resume = (): void => {
      res.off('drain', resume);
      res.off('close', resume);
      this.waiting = false;
      this.r.c.watch.quietMs = this.r.c.limits.idleTimeoutMs;
      this.r.c.watch.heard++;
      // After a disconnect the request is aborted: nothing to resume.
      if (!this.r.clientGone) this.r.controller?.resume();
    };
    res.on('drain', resume);
    res.on('close', resume);
  }

  end(): void {
    if (this.format === 'ndjson') this.data(NEWLINE);
    this.flush();
    if (!this.relay.done && !this.relay.sawError) {
      this.r.upstreamFailed('upstream_unavailable');
      this.endWithError(
        obError('upstream_unavailable', { message: 'The model server ended the stream before it was complete.' }),
      );
    } else if (!this.r.c.res.writableEnded) this.r.c.res.end();
    this.count();
  }

  gone(): void {
    this.count();
  }

  failed(err: ObProxyError): void {
    this.r.errored = true;
    this.r.c.trace?.error(err.code);
    this.flush();
    if (this.relay.invalid || this.relay.sawError) {
      this.count();
      return;
    }
    if (!this.begun) writeRawError(this.r.c.res, err, this.r.c.reqId, answerHeaders(err, this.r.c.headers));
    else if (!this.relay.done) this.endWithError(err);
    this.count();
  }

  /** The model server's counts where they are token counts; else the completion is the content events. */
  private count(): void {
    const u = this.relay.counts();
    this.r.finish(u.prompt, u.completion, u.reasoning, this.relay.contentChunks);
  }

  /** After a 200 has been sent, the only way to say "failed": one error event, no [DONE]. */
  private endWithError(err: ObProxyError): void {
    const res = this.r.c.res;
    if (res.writableEnded) return;
    const e =
      err.code === 'upstream_timeout'
        ? obError('upstream_timeout', { message: 'The model server sent nothing for too long; the stream was ended.' })
        : err;
    res.end(this.relay.closingError(e));
  }
}

/** An event stream whose reads its trace span reads first (the model and finish reason of a stream). */
class TappedEvents implements EventStream {
  constructor(
    private readonly inner: EventStream,
    private readonly tap: { read(chunk: Buffer): void },
  ) {}

  pushInto(chunk: Buffer, out: OutputBatch): void {
    this.tap.read(chunk);
    this.inner.pushInto(chunk, out);
  }

  get stopped(): boolean {
    return this.inner.stopped;
  }

  get done(): boolean {
    return this.inner.done;
  }

  get sawError(): boolean {
    return this.inner.sawError;
  }

  get invalid(): boolean {
    return this.inner.invalid;
  }

  get invalidReason(): InvalidReason | null {
    return this.inner.invalidReason;
  }

  get contentChunks(): number {
    return this.inner.contentChunks;
  }

  counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    return this.inner.counts();
  }

  closingError(err: ObProxyError): string {
    return this.inner.closingError(err);
  }
}
