/**
 * OpenTelemetry traces (docs/operations.md#traces): one span per request to a model route, with
 * the GenAI semantic conventions, sent in batches to a collector over OTLP/HTTP. Loaded with
 * `import()` only when `--otlp-endpoint` is given: a daemon without it loads none of the SDK,
 * and every hook on the request path is a null check (`ctx.tracing`).
 *
 * The provider is this daemon's own, never registered as the process's global one: nothing else
 * in the process (a library's instrumentation) adds spans to it or reads its context.
 */
import { ROOT_CONTEXT, type Context, SpanKind, type Tracer, defaultTextMapGetter, trace } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOnSampler,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ObProxyError } from '../../src/errors.js';
import type { AuthContext } from '../data-plane/auth-context.js';
import { ExchangeSpan, type GenAiRequest, refusalAttributes, routeTraceOf } from './exchange-span.js';

export interface TracingOptions {
  /** The collector's traces URL (config `otlp.url`). */
  url: string;
  serviceName: string;
  version: string;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /** Batching, for tests; the defaults otherwise. */
  scheduledDelayMs?: number;
}

/** Spans kept waiting for the collector; more are dropped (counted by the SDK), never a request held. */
const MAX_QUEUE = 4096;
const BATCH = 512;
/** One export's bound: a collector that does not answer within it costs that batch, nothing else. */
const EXPORT_TIMEOUT_MS = 10_000;
/**
 * Attribute values are cut to this length: a response model or finish reason comes from the
 * model server, and a hostile one must not make spans large.
 */
const MAX_ATTRIBUTE_CHARS = 256;

export class Tracing {
  private readonly tracer: Tracer;
  private readonly propagator = new W3CTraceContextPropagator();

  constructor(
    private readonly provider: TracerProvider,
    version: string,
  ) {
    this.tracer = provider.getTracer('ob-proxy', version);
  }

  /**
   * The span of an exchange about to be sent upstream, begun when its request arrived (Fastify's
   * elapsed time). A valid `traceparent` from the client makes it that span's child; an invalid
   * one is ignored and a new trace begins. Every span is recorded, whatever the client's sampled
   * flag: the operator decides what the gateway traces, not its clients.
   */
  exchange(reply: FastifyReply, auth: AuthContext, req: GenAiRequest): ExchangeSpan {
    return this.begin(reply.request, performance.now() - reply.elapsedTime, auth, req);
  }

  /**
   * The span of one message's exchange on a Responses WebSocket, begun when the message came
   * (`startTime`, performance.now()); `upgrade` is the socket's upgrade request, whose
   * `traceparent` makes each of its exchanges a child of the client's span.
   */
  socketExchange(upgrade: FastifyRequest, startTime: number, auth: AuthContext, req: GenAiRequest): ExchangeSpan {
    return this.begin(upgrade, startTime, auth, req);
  }

  private begin(request: FastifyRequest, startTime: number, auth: AuthContext, req: GenAiRequest): ExchangeSpan {
    const route = routeTraceOf(request) ?? { operation: 'chat', provider: 'openai' };
    const span = this.tracer.startSpan(
      `${route.operation} ${req.model}`,
      { kind: SpanKind.CLIENT, startTime },
      this.parentOf(request),
    );
    return new ExchangeSpan(span, route, auth, req);
  }

  /**
   * A refusal answered by Fastify (send-error.ts replyError) on a model route: a span of its own,
   * with our error code. `key` and `instance`: set only when the request's secret was a key's.
   */
  refused(reply: FastifyReply, err: ObProxyError, key: string | undefined, instance: string | undefined): void {
    const request = reply.request;
    const route = routeTraceOf(request);
    if (route === null) return;
    const span = this.tracer.startSpan(
      route.operation,
      {
        kind: SpanKind.CLIENT,
        startTime: performance.now() - reply.elapsedTime,
        attributes: refusalAttributes(route, err, key, instance),
      },
      this.parentOf(request),
    );
    span.setStatus({ code: 2 /* SpanStatusCode.ERROR */, message: err.code });
    span.end(performance.now());
  }

  private parentOf(request: FastifyRequest): Context {
    if (request.headers.traceparent === undefined) return ROOT_CONTEXT;
    const ctx = this.propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
    return trace.getSpanContext(ctx) === undefined ? ROOT_CONTEXT : ctx;
  }

  /** Sends the spans ended so far now, rather than with the next batch (for tests). */
  flush(): Promise<void> {
    return this.provider.forceFlush();
  }

  /**
   * Sends what is queued and stops, within `timeoutMs`: a collector that is down or slow costs
   * the spans not sent, never a longer shutdown. Its failure is logged (LoggedExporter).
   */
  async stop(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([this.provider.shutdown().catch(() => {}), expired]);
    clearTimeout(timer);
  }
}

/**
 * Says in the log when the collector stops taking spans, and when it takes them again: once per
 * change, not once per batch, so a collector that is down for a day does not fill the disk.
 */
class LoggedExporter implements SpanExporter {
  private failing = false;

  constructor(
    private readonly inner: SpanExporter,
    private readonly url: string,
    private readonly log: TracingOptions['log'],
  ) {}

  export(spans: ReadableSpan[], done: (result: { code: ExportResultCode; error?: Error }) => void): void {
    this.inner.export(spans, (result) => {
      const failed = result.code !== ExportResultCode.SUCCESS;
      if (failed !== this.failing) {
        this.failing = failed;
        if (failed)
          this.log.warn(
            { collector: this.url, error: result.error?.message ?? 'export failed', spans: spans.length },
            'the trace collector did not take spans: they are dropped until it does (requests are not affected)',
          );
        else this.log.info({ collector: this.url }, 'the trace collector takes spans again');
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

export function startTracing(o: TracingOptions): Tracing {
  const exporter = new LoggedExporter(
    new OTLPTraceExporter({ url: o.url, timeoutMillis: EXPORT_TIMEOUT_MS }),
    o.url,
    o.log,
  );
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: o.serviceName, [ATTR_SERVICE_VERSION]: o.version }),
    sampler: new AlwaysOnSampler(),
    spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_CHARS, attributeCountLimit: 64 },
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        maxQueueSize: MAX_QUEUE,
        maxExportBatchSize: BATCH,
        scheduledDelayMillis: o.scheduledDelayMs ?? 1000,
        exportTimeoutMillis: EXPORT_TIMEOUT_MS,
      }),
    ],
  });
  return new Tracing(provider, o.version);
}
