import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from './process-metrics.js';
import type { Registry as KeyRegistry } from '../../src/services/registry.js';
import { Buckets, InstanceSeries, type KeySeries, registerHistogram } from './hot-series.js';
import { nextTurn } from '../turn-budget.js';
import { type TextGauge, gaugePieces } from './text-gauge.js';

/**
 * How long the series of a revoked key or a removed instance stay in the exposition after a
 * scrape first finds it gone: long enough for every Prometheus that scrapes this daemon (every
 * 15 s to a few minutes) to read its final counts, and then dropped, so rentals that come and go
 * do not grow the exposition (and Prometheus' series count) for ever.
 */
export const GONE_RETAIN_MS = 15 * 60_000;

/** The client APIs, in the order their answers are counted (AnswerCounter): chat first. */
export const ROUTES = [
  'chat',
  'responses',
  'completions',
  'messages',
  'ollama_chat',
  'ollama_generate',
  'ollama_embed',
] as const;

/** The values of the second label of the instance-labelled prom-client series, for dropping them. */
const UPSTREAM_KINDS = ['upstream_unavailable', 'upstream_timeout', 'upstream_error'];

// From 1 ms to 10 min: a model may load for minutes before its first token.
const SLOW = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * The daemon's Prometheus series (docs/operations.md lists them; docs/grafana-dashboard.json plots
 * them). Labels are bounded: instance ids, key ids (never names or secrets; `keyLabel: false` drops
 * them for very many keys), status codes and error codes. What every request records (its answer,
 * durations, tokens, open streams) is counted in plain numbers per instance and key
 * (hot-series.ts) and read at scrape time; rarer events (refusals, upstream errors, revocations)
 * go to prom-client directly.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly keyLabel: boolean;
  private readonly instances = new Map<string, InstanceSeries>();
  private readonly added = new Buckets([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1]);
  private readonly refusals: Counter<'code'>;
  private readonly upstreamErrors: Counter<'instance' | 'kind'>;
  private readonly revocations: Counter<'reason'>;
  private readonly storeWrites: Histogram;
  private readonly rateLimits: Counter<'instance' | 'limit'>;
  private readonly queued: Gauge<'instance'>;
  private readonly queueWaits: Histogram<'instance'>;
  private readonly registryOf: () => KeyRegistry | undefined;
  /** The per-instance gauges the daemon writes itself, after prom-client's metrics (text-gauge.ts). */
  private readonly textGauges: readonly TextGauge[];
  private readonly clock: { now(): number };
  /** Series found gone (`instance` or `instance\0key`) → when a scrape first found it so. */
  private readonly goneSince = new Map<string, number>();
  /** Instances with a rate_limited series, and which limits: prom-client drops a series by all its labels. */
  private readonly limitedBy = new Map<string, Set<string>>();

  constructor(opts: {
    keyLabel: boolean;
    keys: () => KeyRegistry | undefined;
    health?: () => Iterable<{ instance: string; status: string } | null>;
    clock?: { now(): number };
  }) {
    this.keyLabel = opts.keyLabel;
    this.registryOf = opts.keys;
    this.clock = opts.clock ?? Date;
    const registers = [this.registry];
    collectProcessMetrics(this.registry, 'ob_proxy_');
    const series = (): Iterable<[string, InstanceSeries, string, KeySeries]> => this.keySeries();
    const keyLabel = opts.keyLabel;
    new Counter({
      name: 'ob_proxy_requests_total',
      help: 'Requests answered, by instance, key id and HTTP status (refused before a key was known: instance and key empty); route for the APIs other than chat completions (responses, completions, messages, ollama_chat, ollama_generate, ollama_embed).',
      labelNames: keyLabel ? ['instance', 'key', 'code', 'route'] : ['instance', 'code', 'route'],
      registers,
      collect() {
        this.reset();
        for (const [instance, , key, k] of series()) {
          for (const [answer, n] of k.codes) {
            // A route other than chat's is counted as status + 1000 × its place in ROUTES (answered()).
            const code = String(answer % 1000);
            const route = ROUTES[Math.floor(answer / 1000)] ?? 'chat';
            const labels: Record<string, string> = keyLabel ? { instance, key, code } : { instance, code };
            if (route !== 'chat') labels.route = route;
            this.inc(labels, n);
          }
        }
      },
    });
    this.refusals = new Counter({
      name: 'ob_proxy_key_refusals_total',
      help: 'Requests refused for their key, by code: missing_api_key, invalid_api_key, rate_limited (guessers), deployment_not_found, revoked_api_key, deployment_not_ready.',
      labelNames: ['code'],
      registers,
    });
    const instances = this.instances;
    registerHistogram(
      this.registry,
      'ob_proxy_request_duration_seconds',
      "Whole chat completion requests, from their first byte to the answer's last.",
      () => [...instances].map(([instance, s]) => [{ instance }, s.duration] as const),
    );
    registerHistogram(
      this.registry,
      'ob_proxy_upstream_first_byte_seconds',
      'From sending a request to the model server to its response headers.',
      () => [...instances].filter(([, s]) => s.ttfb.count > 0).map(([instance, s]) => [{ instance }, s.ttfb] as const),
    );
    registerHistogram(
      this.registry,
      'ob_proxy_added_seconds',
      "The proxy's own time before the model server is asked: auth, body, validation.",
      () => [[{}, this.added]],
    );
    new Counter({
      name: 'ob_proxy_tokens_total',
      help: 'Tokens charged, by instance, key id and kind: prompt and completion (as the model servers reported them, else estimated), reasoning where reported apart (part of completion), estimated (part of prompt and completion: not reported by the model server).',
      labelNames: keyLabel ? ['instance', 'key', 'kind'] : ['instance', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const [instance, , key, k] of series()) {
          if (k.prompt > 0)
            this.inc(keyLabel ? { instance, key, kind: 'prompt' } : { instance, kind: 'prompt' }, k.prompt);
          if (k.completion > 0)
            this.inc(keyLabel ? { instance, key, kind: 'completion' } : { instance, kind: 'completion' }, k.completion);
          if (k.reasoning > 0)
            this.inc(keyLabel ? { instance, key, kind: 'reasoning' } : { instance, kind: 'reasoning' }, k.reasoning);
          if (k.estimated > 0)
            this.inc(keyLabel ? { instance, key, kind: 'estimated' } : { instance, kind: 'estimated' }, k.estimated);
        }
      },
    });
    new Gauge({
      name: 'ob_proxy_open_streams',
      help: 'Streams being relayed now.',
      labelNames: ['instance'],
      registers,
      collect() {
        this.reset();
        for (const [instance, s] of instances) if (s.streamed) this.set({ instance }, s.streams);
      },
    });
    this.upstreamErrors = new Counter({
      name: 'ob_proxy_upstream_errors_total',
      help: 'Model server failures by kind: upstream_unavailable, upstream_timeout, upstream_error (an error status, or an answer over a limit).',
      labelNames: ['instance', 'kind'],
      registers,
    });
    this.revocations = new Counter({
      name: 'ob_proxy_revocations_total',
      help: 'Keys revoked, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.storeWrites = new Histogram({
      name: 'ob_proxy_store_write_seconds',
      help: 'Store commits, from the call to durable.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.rateLimits = new Counter({
      name: 'ob_proxy_rate_limited_total',
      help: "Requests of valid keys refused with 429 rate_limited, by instance and limit: rpm, tpm, concurrency (the key's), queue_full, queue_timeout (the instance's admission).",
      labelNames: ['instance', 'limit'],
      registers,
    });
    this.queued = new Gauge({
      name: 'ob_proxy_queue_depth',
      help: 'Requests waiting for a slot of their instance (--max-concurrency).',
      labelNames: ['instance'],
      registers,
    });
    this.queueWaits = new Histogram({
      name: 'ob_proxy_queue_wait_seconds',
      help: 'How long requests that waited for a slot of their instance waited before their turn.',
      labelNames: ['instance'],
      buckets: SLOW,
      registers,
    });
    const keys = opts.keys;
    const health = opts.health;
    this.textGauges = [
      {
        name: 'ob_proxy_keys',
        help: 'API keys by instance and status.',
        // Counted at scrape time from the registry (nothing to keep in step), an instance at a
        // time. Keys of instances removed are all revoked, and counted no more: the gauge's label
        // set stays that of the instances there are.
        *series() {
          const reg = keys();
          if (reg === undefined) return;
          for (const instance of reg.instances.keys()) {
            let active = 0;
            let revoked = 0;
            for (const k of reg.keysOf(instance)) {
              if (k.status === 'active') active++;
              else revoked++;
            }
            if (active > 0) yield [{ instance, status: 'active' }, active];
            if (revoked > 0) yield [{ instance, status: 'revoked' }, revoked];
          }
        },
      },
      {
        name: 'ob_proxy_instance_health',
        help: "Last probe of each ready instance's model server (GET /v1/models): 1 on the status it found (reachable, unreachable, model missing), 0 on the others.",
        *series() {
          for (const h of health?.() ?? []) {
            if (h === null) yield null;
            else
              for (const status of ['model missing', 'reachable', 'unreachable'])
                yield [{ instance: h.instance, status }, status === h.status ? 1 : 0];
          }
        },
      },
    ];
  }

  private *keySeries(): Iterable<[string, InstanceSeries, string, KeySeries]> {
    for (const [instance, s] of this.instances) for (const [key, k] of s.keys) yield [instance, s, key, k];
  }

  /** The series of an instance (created at its first request; instance '' before a key is known). */
  instance(id: string): InstanceSeries {
    let s = this.instances.get(id);
    if (s === undefined) this.instances.set(id, (s = new InstanceSeries(SLOW)));
    return s;
  }

  /** A key's series within its instance's (one for all keys when the key label is off). */
  key(instance: InstanceSeries, key: string): KeySeries {
    return instance.key(this.keyLabel ? key : '');
  }

  /** One request answered (or refused) with `status`, after `seconds`; `route`: its place in ROUTES (0, chat). */
  answered(instance: string, key: string, status: number, seconds: number, route = 0): void {
    const s = this.instance(instance);
    this.key(s, key).answered(route === 0 ? status : status + 1000 * route);
    s.duration.observe(seconds);
  }

  keyRefused(code: string): void {
    this.refusals.inc({ code });
  }

  addedTime(seconds: number): void {
    this.added.observe(seconds);
  }

  upstreamError(instance: string, kind: string): void {
    this.upstreamErrors.inc({ instance, kind });
  }

  revoked(reason: string): void {
    this.revocations.inc({ reason });
  }

  rateLimited(instance: string, limit: string): void {
    this.rateLimits.inc({ instance, limit });
    let s = this.limitedBy.get(instance);
    if (s === undefined) this.limitedBy.set(instance, (s = new Set()));
    s.add(limit);
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

  /**
   * The exposition, after dropping what has been gone for longer than GONE_RETAIN_MS, in pieces
   * each written as it is made: prom-client's metrics, then the per-instance gauges a piece at a
   * time (text-gauge.ts).
   */
  async *scrapePieces(): AsyncGenerator<string> {
    this.prune(this.clock.now());
    yield await this.registry.metrics();
    for (const g of this.textGauges) {
      // Each gauge starts on a turn of its own, not on the end of the piece before.
      await nextTurn();
      yield* gaugePieces(g);
    }
  }

  /** The whole exposition as one text. */
  async scrape(): Promise<string> {
    let text = '';
    for await (const piece of this.scrapePieces()) text += piece;
    return text;
  }

  /**
   * Drops the series of keys revoked (or no longer known) and of instances removed, once a scrape
   * found them gone GONE_RETAIN_MS ago. An instance's series stay while a stream is open on it. A
   * series that comes back (an instance added again under its id, a late answer) starts again
   * from zero, which Prometheus reads as a counter reset.
   */
  prune(now: number): void {
    const reg = this.registryOf();
    if (reg === undefined) return;
    const seen = new Set<string>();
    const due = (id: string): boolean => {
      seen.add(id);
      const since = this.goneSince.get(id);
      if (since === undefined) this.goneSince.set(id, now);
      return since !== undefined && now - since >= GONE_RETAIN_MS;
    };
    for (const [instance, s] of this.instances) {
      if (instance === '') continue;
      if (!reg.instances.has(instance)) {
        if (s.streams === 0 && due(instance)) this.dropInstance(instance);
        continue;
      }
      for (const keyId of s.keys.keys()) {
        if (keyId === '' || reg.keys.get(keyId)?.status === 'active') continue;
        if (due(`${instance}\0${keyId}`)) s.keys.delete(keyId);
      }
    }
    for (const instance of this.limitedBy.keys())
      if (!this.instances.has(instance) && !reg.instances.has(instance) && due(instance)) this.dropInstance(instance);
    // Whatever is back (an instance added again) or dropped starts its wait anew.
    for (const id of this.goneSince.keys()) if (!seen.has(id)) this.goneSince.delete(id);
  }

  private dropInstance(instance: string): void {
    this.instances.delete(instance);
    for (const kind of UPSTREAM_KINDS) this.upstreamErrors.remove({ instance, kind });
    for (const limit of this.limitedBy.get(instance) ?? []) this.rateLimits.remove({ instance, limit });
    this.limitedBy.delete(instance);
    this.queued.remove({ instance });
    this.queueWaits.remove({ instance });
  }
}
