import { UpstreamWatch } from './upstream-watch.js';
import type { ServerResponse } from 'node:http';
import type { KeyRecord } from '../../src/domain/key.js';
import type { ObProxyError } from '../../src/errors.js';
import type { LiveCounter } from '../../src/services/live-stats.js';
import type { RequestOutcome } from '../../src/services/usage.js';
import type { Media } from '../../src/wire/media.js';
import { estimateCompletionTokens, estimatePromptTokens, learnPace } from '../../src/wire/prompt-estimate.js';
import type { DaemonBasics, ExchangeDeps, KeyCheckDeps } from '../context.js';
import { RequestObserver } from '../metrics/request-observer.js';
import type { Exchange } from './exchange.js';
import type { ExchangeSink } from './exchange-sink.js';
import type { Checked, ExchangeRoute } from './wire-api.js';
import { settleTokens } from './key-limits.js';
import type { InflightEntry, InflightNode, Terminable } from './inflight.js';
import { type CloseWatcher, type HeldSlot, unwatchClose, watchClose } from './close-watch.js';
import type { ExchangeSpan } from '../tracing/exchange-span.js';
import type { UsageLog } from '../usage-log.js';

/** What of an exchange its end reads: the parts of any API's Exchange that do not name its request type. */
type ChargedExchange = Pick<Exchange<Checked>, 'auth' | 'checked' | 'body' | 'res' | 'reqId' | 'slot' | 'trace'> & {
  readonly api: ExchangeRoute;
};

/** What an exchange's end charges and reports to. */
export type AccountingDeps = Pick<DaemonBasics, 'clock' | 'log' | 'metrics'> &
  Pick<ExchangeDeps, 'usage' | 'live' | 'inflight' | 'admission' | 'usageLog'> &
  Pick<KeyCheckDeps, 'keyLimits'>;

const INFO_LEVELS = new Set(['trace', 'debug', 'info']);

/**
 * One exchange with a model server, from the turn it is sent to the turn it is over: the one
 * place its key's usage, its tpm charge, its admission slot, the live figures and the metrics
 * are told of it. Made when the request is sent (its usage's request count and `lastUsedAt`,
 * its live request and open stream); `ended` is called once by its relay, and takes it out of
 * its key's in-flight list.
 *
 * It is its own place in that list, and its response's close watch, not its relay: a
 * revocation ends the exchange, and a client's departure is told, through whichever relay
 * carries it now (a resend hands it to the next without leaving the list or the watch), and a
 * relay knows nothing of the list nor of the key's slot. It names numbers and the records it charges, not the request nor
 * its body: it lives as long as the answer, and what it names is kept that long.
 *
 * What the model server did not report is charged by estimate, and counted as such (the
 * receipt's estimatedTokens): a stream's completion as its content events, a plain answer left
 * by its client at the instance's pace.
 */
export class ExchangeAccount implements ExchangeSink, InflightNode, CloseWatcher {
  /** The relay carrying it now: what a revocation ends, and what is told its client left. */
  relay: (Terminable & CloseWatcher) | null = null;
  /** Its place in the response deadlines and its watch on the model server's silence, handed to each relay that carries it. */
  readonly watch = new UpstreamWatch();
  /** The key's concurrency slot, when it has limits: given back when the response closes or the exchange is over. */
  private readonly keySlot: HeldSlot | null;
  inflightEntry: InflightEntry | null = null;
  inflightPrev: InflightNode | null = null;
  inflightNext: InflightNode | null = null;
  /** Only while metrics are on: a request keeps it for its whole life, and scavenges copy it. */
  readonly observer: RequestObserver | null;
  private readonly res: ServerResponse;
  private readonly reqId: string;
  /** The instance whose admission slot the request holds, or null. */
  private readonly slot: string | null;
  /** The client API it came through: its usage by route, and its access line's message. */
  private readonly via: ExchangeRoute;
  /** The exchange's trace span, ended with it; null: tracing off. */
  private readonly trace: ExchangeSpan | null;
  private readonly sentAt: number;
  private readonly live: LiveCounter;
  private readonly key: KeyRecord;
  private readonly instance: string;
  private readonly stream: boolean;
  private readonly bodyLength: number;
  private readonly media: Media;
  private readonly completionCap: number | null;

  private readonly started = performance.now();

  /** `x`: the exchange as it is sent; its body's length is what an unreported prompt is estimated from. */
  constructor(
    private readonly ctx: AccountingDeps,
    x: ChargedExchange,
  ) {
    const { auth, checked: shape } = x;
    this.res = x.res;
    this.reqId = x.reqId;
    this.slot = x.slot;
    this.via = x.api;
    this.trace = x.trace;
    this.key = auth.key;
    this.instance = auth.instance.id;
    this.stream = shape.stream;
    this.bodyLength = x.body.length;
    this.media = shape.media;
    this.completionCap = shape.completionCap;
    this.sentAt = ctx.clock.now();
    ctx.usage.record(auth.key, this.sentAt, x.api.route, 0, 0);
    const live = ctx.live.counter(auth.instance.id);
    live.requests += 1;
    if (shape.stream) live.openStreams += 1;
    this.live = live;
    // One listener for the response, shared by all (close-watch.ts); the key's slot it held until now.
    this.keySlot = watchClose(x.res, this);
    this.observer =
      ctx.metrics === null ? null : new RequestObserver(ctx.metrics, auth.instance.id, auth.key.id, shape.stream);
  }

  /** The client's response closed: written whole, or its client left. */
  clientClosed(): void {
    // Either way the key's slot is free again (a stream's upstream may still be drained after
    // [DONE]; that is not the key's request).
    this.keySlot?.release();
    this.relay?.clientClosed();
  }

  /** Its key was revoked, or its pack ended (inflight.ts): its relay ends it. */
  terminate(err: ObProxyError): void {
    this.relay?.terminate(err);
  }

  ended(
    reportedPrompt: number | null,
    reportedCompletion: number | null,
    counted: number,
    reasoning: number,
    outcome: RequestOutcome,
  ): void {
    const { ctx, live, key } = this;
    unwatchClose(this.res);
    this.keySlot?.release();
    ctx.inflight.delete(this);
    const prompt = reportedPrompt ?? estimatePromptTokens(this.bodyLength, this.media);
    const now = ctx.clock.now();
    let completion = reportedCompletion ?? counted;
    if (outcome === 'ok') live.tokensPerMs = learnPace(live.tokensPerMs, completion, now - this.sentAt);
    else if (outcome === 'disconnect' && !this.stream && reportedCompletion === null && counted === 0)
      completion = estimateCompletionTokens(live.tokensPerMs, now - this.sentAt, this.completionCap);
    const estimated = (reportedPrompt === null ? prompt : 0) + (reportedCompletion === null ? completion : 0);
    if (this.slot !== null) ctx.admission?.leave(this.slot);
    ctx.usage.finished(key, { route: this.via.route, prompt, completion, reasoning, estimated, outcome });
    settleTokens(ctx, this.res, key, prompt + completion, now);
    live.tokens += completion;
    if (outcome === 'error') live.errors += 1;
    if (this.stream) live.openStreams -= 1;
    this.observer?.over(prompt, completion, reasoning, estimated);
    this.trace?.end(this.res.statusCode, prompt, completion, estimated, outcome);
    if (ctx.usageLog !== null) this.logUsage(ctx.usageLog, prompt, completion, estimated, outcome);
    // The access line; its object is not even built when info is off (--log-level warn).
    if (INFO_LEVELS.has(ctx.log.level))
      ctx.log.info(
        {
          reqId: this.reqId,
          key: key.id,
          instance: this.instance,
          stream: this.stream,
          status: this.res.statusCode,
          ms: Math.round((performance.now() - this.started) * 100) / 100,
        },
        this.via.logMessage,
      );
  }

  /** The exchange's usage line (--usage-log), the route as the client called it. */
  private logUsage(
    log: UsageLog,
    prompt: number,
    completion: number,
    estimated: number,
    outcome: RequestOutcome,
  ): void {
    const path = this.res.req?.url ?? '';
    const q = path.indexOf('?');
    log.exchange({
      id: this.reqId,
      key: this.key.id,
      instance: this.instance,
      route: q === -1 ? path : path.slice(0, q),
      stream: this.stream,
      status: this.res.statusCode,
      outcome,
      input: prompt,
      output: completion,
      estimated,
      ms: Math.round(performance.now() - this.started),
    });
  }
}
