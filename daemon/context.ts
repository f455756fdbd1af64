import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../src/clock.js';
import type { Config } from '../src/config.js';
import type { InstanceHealth } from '../src/services/instance-health.js';
import type { LifecycleService } from '../src/services/lifecycle.js';
import type { KeyLimiter } from '../src/services/key-limiter.js';
import type { ByteBudget } from '../src/services/byte-budget.js';
import type { LiveStats } from '../src/services/live-stats.js';
import type { UsageTracker } from '../src/services/usage.js';
import type { UpstreamClient } from '../src/upstream/upstream-client.js';
import type { EventLayoutsByServer } from '../src/wire/event-layouts.js';
import type { Admission } from './data-plane/admission.js';
import type { StoreSyncView } from '../src/wire/views.js';
import type { BadKeyLimiter } from './data-plane/bad-key-limiter.js';
import type { Deadlines } from './data-plane/deadlines.js';
import type { InflightRequests } from './data-plane/inflight.js';
import type { Metrics } from './metrics/metrics.js';
import type { Tracing } from './tracing/tracer.js';
import type { UpstreamTokens } from './upstream-tokens.js';
import type { UsageLog } from './usage-log.js';
import type { DaemonReports } from '../src/services/revocation-confirmation.js';

/*
 * The daemon's shared state, in four parts by concern. Only the assembly (build-context.ts,
 * build-daemon.ts and the two plane builders) holds the whole; every other file declares the
 * fields it reads as a Pick of these parts, so its signature says what it touches and a test can
 * hand it a small fake (scripts/whole-context.mjs keeps it so). A narrow view is the same object
 * typed narrower, never a copy: `draining` and `storeStale` change at run time and are read live.
 */

/** What nearly every file reads. */
export interface DaemonBasics {
  config: Config;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Prometheus series, when --metrics-port is set; null otherwise (nothing recorded). */
  metrics: Metrics | null;
}

/** Whether a key may be served: its record, its limits, and the states that refuse every key. */
export interface KeyCheckDeps {
  lifecycle: LifecycleService;
  badKeys: BadKeyLimiter;
  /** Per-key rpm, tpm and concurrency windows (memory, this daemon only). */
  keyLimits: KeyLimiter;
  /** Set when SIGTERM arrives: new requests get 503, in-flight ones finish. */
  draining: boolean;
  /** Out of sync with a shared store for longer than --max-stale: every key is refused (503). */
  storeStale: boolean;
}

/** What an exchange with a model server goes through, from its body's arrival to its charge. */
export interface ExchangeDeps {
  upstream: UpstreamClient;
  /** Model-server tokens per instance, in memory (never in the store). */
  upstreamTokens: UpstreamTokens;
  /** Request bodies held, per key, per instance and in all (--body-memory-per-key, …-per-instance, --body-memory). */
  bodies: ByteBudget;
  /** The bodies still arriving, and how long each has been silent (OB_PROXY_BODY_TIMEOUT), swept like `deadlines`. */
  bodyReads: Deadlines;
  /** Per-instance admission queue; null without --max-concurrency. */
  admission: Admission | null;
  /** Requests sent upstream and not yet over, per key: a revocation ends them. */
  inflight: InflightRequests;
  /** Their response deadlines, one list swept four times a second. */
  deadlines: Deadlines;
  /** Stream event layouts learned per instance, shared by its streams (src/wire/event-layouts.ts). */
  eventLayouts: EventLayoutsByServer;
  usage: UsageTracker;
  /** Per-instance live figures for the console, sampled once a second. */
  live: LiveStats;
  /** OpenTelemetry traces, when --otlp-endpoint is set; null otherwise (its SDK never loaded). */
  tracing: Tracing | null;
  /** A JSON line per request for billing, when --usage-log is set; null otherwise. */
  usageLog: UsageLog | null;
}

/** What the management plane reports of the daemon itself. */
export interface StatusDeps {
  /** The last probe of each ready instance, refreshed every --probe-interval. */
  health: InstanceHealth;
  /** The public base URL, known once the data plane listens. */
  baseUrl: string;
  version: string;
  startedAt: string;
  /** Where the metrics are scraped, once listening. */
  metricsUrl: string | null;
  /** Where the store is, for `status` (a PostgreSQL URL without its password). */
  storeLocation: string;
  /** A shared store's sync state for `status`; null for a store this daemon alone writes. */
  storeSync(): StoreSyncView | null;
  /** A shared store's daemon rows (docs/scale-out.md); null for a store this daemon alone serves. */
  daemonReports: ((keyIds: readonly string[]) => Promise<DaemonReports>) | null;
}

/** What both planes share; built once by buildDaemon. */
export interface DaemonContext extends DaemonBasics, KeyCheckDeps, ExchangeDeps, StatusDeps {}
