import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Registry as KeyRegistry } from '../../src/services/registry.js';

/**
 * The daemon's Prometheus series (docs/operations.md lists them; docs/grafana-dashboard.json plots
 * them). Labels are bounded: instance ids, key ids (never names or secrets; `keyLabel: false` drops
 * them for very many keys), status codes and error codes. Every method is a few map lookups: they
 * run on the request path.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly keyLabel: boolean;
  private readonly requests: Counter<'instance' | 'key' | 'code'>;
  private readonly refusals: Counter<'code'>;
  private readonly duration: Histogram<'instance'>;
  private readonly ttfb: Histogram<'instance'>;
  private readonly added: Histogram;
  private readonly tokens: Counter<'instance' | 'key' | 'kind'>;
  private readonly streams: Gauge<'instance'>;
  private readonly upstreamErrors: Counter<'instance' | 'kind'>;
  private readonly revocations: Counter<'reason'>;
  private readonly storeWrites: Histogram;
  private readonly rateLimits: Counter<'instance' | 'limit'>;
  private readonly queued: Gauge<'instance'>;
  private readonly queueWaits: Histogram<'instance'>;

  constructor(opts: { keyLabel: boolean; keys: () => KeyRegistry | undefined; health?: () => Iterable<{ instance: string; status: string }> }) {
    this.keyLabel = opts.keyLabel;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'ob_proxy_' });
    const requestLabels = opts.keyLabel ? ['instance', 'key', 'code'] as const : ['instance', 'code'] as const;
    this.requests = new Counter({ name: 'ob_proxy_requests_total', help: 'Chat completion requests answered, by instance, key id and HTTP status (refused before a key was known: instance and key empty).', labelNames: requestLabels, registers });
    this.refusals = new Counter({ name: 'ob_proxy_key_refusals_total', help: 'Requests refused for their key, by code: missing_api_key, invalid_api_key, rate_limited (guessers), deployment_not_found, revoked_api_key, deployment_not_ready.', labelNames: ['code'], registers });
    // From 1 ms to 10 min: a model may load for minutes before its first token.
    const slow = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
    this.duration = new Histogram({ name: 'ob_proxy_request_duration_seconds', help: 'Whole chat completion requests, from their first byte to the answer\'s last.', labelNames: ['instance'], buckets: slow, registers });
    this.ttfb = new Histogram({ name: 'ob_proxy_upstream_first_byte_seconds', help: 'From sending a request to the model server to its response headers.', labelNames: ['instance'], buckets: slow, registers });
    this.added = new Histogram({ name: 'ob_proxy_added_seconds', help: 'The proxy\'s own time before the model server is asked: auth, body, validation.', buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1], registers });
    this.tokens = new Counter({ name: 'ob_proxy_tokens_total', help: 'Tokens the model servers reported in usage, by instance, key id and kind (prompt, completion, and reasoning where reported apart: part of completion).', labelNames: opts.keyLabel ? ['instance', 'key', 'kind'] : ['instance', 'kind'], registers });
    this.streams = new Gauge({ name: 'ob_proxy_open_streams', help: 'Streams being relayed now.', labelNames: ['instance'], registers });
    this.upstreamErrors = new Counter({ name: 'ob_proxy_upstream_errors_total', help: 'Model server failures by kind: upstream_unavailable, upstream_timeout, upstream_error (an error status, or an answer over a limit).', labelNames: ['instance', 'kind'], registers });
    this.revocations = new Counter({ name: 'ob_proxy_revocations_total', help: 'Keys revoked, by reason.', labelNames: ['reason'], registers });
    this.storeWrites = new Histogram({ name: 'ob_proxy_store_write_seconds', help: 'Store commits, from the call to durable.', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers });
    this.rateLimits = new Counter({ name: 'ob_proxy_rate_limited_total', help: 'Requests of valid keys refused with 429 rate_limited, by instance and limit: rpm, tpm, concurrency (the key\'s), queue_full, queue_timeout (the instance\'s admission).', labelNames: ['instance', 'limit'], registers });
    this.queued = new Gauge({ name: 'ob_proxy_queue_depth', help: 'Requests waiting for a slot of their instance (--max-concurrency).', labelNames: ['instance'], registers });
    this.queueWaits = new Histogram({ name: 'ob_proxy_queue_wait_seconds', help: 'How long requests that waited for a slot of their instance waited before their turn.', labelNames: ['instance'], buckets: slow, registers });
    const keys = opts.keys;
    new Gauge({
      name: 'ob_proxy_keys', help: 'API keys by instance and status.', labelNames: ['instance', 'status'], registers,
      // Counted at scrape time from the registry: nothing to keep in step.
      collect() {
        this.reset();
        for (const k of keys()?.keys.values() ?? []) this.inc({ instance: k.instance, status: k.status });
      },
    });
    const health = opts.health;
    new Gauge({
      name: 'ob_proxy_instance_health', help: 'Last probe of each ready instance\'s model server (GET /v1/models): 1 on the status it found (reachable, unreachable, model missing), 0 on the others.', labelNames: ['instance', 'status'], registers,
      collect() {
        this.reset();
        for (const h of health?.() ?? []) {
          for (const status of ['reachable', 'unreachable', 'model missing']) this.set({ instance: h.instance, status }, status === h.status ? 1 : 0);
        }
      },
    });
  }

  /** One chat completion request answered (or refused) with `status`. */
  request(instance: string, key: string, status: number): void {
    const code = String(status);
    if (this.keyLabel) this.requests.inc({ instance, key, code });
    else this.requests.inc({ instance, code });
  }

  keyRefused(code: string): void {
    this.refusals.inc({ code });
  }

  finished(instance: string, seconds: number): void {
    this.duration.observe({ instance }, seconds);
  }

  firstByte(instance: string, seconds: number): void {
    this.ttfb.observe({ instance }, seconds);
  }

  addedTime(seconds: number): void {
    this.added.observe(seconds);
  }

  countTokens(instance: string, key: string, prompt: number, completion: number, reasoning = 0): void {
    if (this.keyLabel) {
      if (prompt > 0) this.tokens.inc({ instance, key, kind: 'prompt' }, prompt);
      if (completion > 0) this.tokens.inc({ instance, key, kind: 'completion' }, completion);
      if (reasoning > 0) this.tokens.inc({ instance, key, kind: 'reasoning' }, reasoning);
    } else {
      if (prompt > 0) this.tokens.inc({ instance, kind: 'prompt' }, prompt);
      if (completion > 0) this.tokens.inc({ instance, kind: 'completion' }, completion);
      if (reasoning > 0) this.tokens.inc({ instance, kind: 'reasoning' }, reasoning);
    }
  }

  streamOpened(instance: string): void {
    this.streams.inc({ instance });
  }

  streamClosed(instance: string): void {
    this.streams.dec({ instance });
  }

  upstreamError(instance: string, kind: string): void {
    this.upstreamErrors.inc({ instance, kind });
  }

  revoked(reason: string): void {
    this.revocations.inc({ reason });
  }

  rateLimited(instance: string, limit: string): void {
    this.rateLimits.inc({ instance, limit });
  }

  queueDepth(instance: string, depth: number): void {
    this.queued.set({ instance }, depth);
  }

  queueWait(instance: string, seconds: number): void {
    this.queueWaits.observe({ instance }, seconds);
  }

  storeWrite(seconds: number): void {
    this.storeWrites.observe(seconds);
  }
}
