import type { Logger } from 'pino';
import { type Clock, iso } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { ByteBudget } from '../src/services/byte-budget.js';
import type { InstanceHealth } from '../src/services/instance-health.js';
import { KeyLimiter, LIMIT_SYNC_MS } from '../src/services/key-limiter.js';
import type { LifecycleService } from '../src/services/lifecycle.js';
import { LiveStats } from '../src/services/live-stats.js';
import { UsageTracker } from '../src/services/usage.js';
import type { Store } from '../src/store/store.js';
import { UpstreamClient } from '../src/upstream/upstream-client.js';
import { EventLayoutsByServer } from '../src/wire/event-layouts.js';
import { storeSyncView } from '../src/wire/views.js';
import type { DaemonContext } from './context.js';
import { Admission } from './data-plane/admission.js';
import { BadKeyLimiter } from './data-plane/bad-key-limiter.js';
import { Deadlines } from './data-plane/deadlines.js';
import { InflightRequests } from './data-plane/inflight.js';
import type { Metrics } from './metrics/metrics.js';
import type { UpstreamTokens } from './upstream-tokens.js';
import { UsageLog } from './usage-log.js';

/** How often response deadlines are swept. */
const DEADLINE_SWEEP_MS = 250;

/**
 * What both planes share, made from the opened store and the settings: not listening, not
 * draining, in sync; per-key limits shared with the other daemons of a shared store.
 */
export async function buildContext(deps: {
  config: Config;
  clock: Clock;
  store: Store;
  lifecycle: LifecycleService;
  upstreamTokens: UpstreamTokens;
  health: InstanceHealth;
  metrics: Metrics | null;
  log: Logger;
  version: string;
}): Promise<DaemonContext> {
  const { config, clock, store, lifecycle, metrics, log } = deps;
  const ctx: DaemonContext = {
    config,
    clock,
    lifecycle,
    usage: new UsageTracker(lifecycle.usageCounters),
    live: new LiveStats(clock.now()),
    upstreamTokens: deps.upstreamTokens,
    health: deps.health,
    upstream: new UpstreamClient({ connectTimeoutMs: config.connectTimeoutMs }),
    badKeys: new BadKeyLimiter(config.badKeyLimit),
    bodies: new ByteBudget(config.bodyMemory, config.bodyMemoryPerKey, config.bodyMemoryPerInstance),
    bodyReads: new Deadlines(DEADLINE_SWEEP_MS, (err) => log.error({ err }, 'unhandled error ending a stalled body')),
    keyLimits: new KeyLimiter(
      config.limitWindowMs,
      store.shareLimits === undefined ? null : { periodMs: LIMIT_SYNC_MS },
    ),
    admission:
      config.maxConcurrency === null
        ? null
        : new Admission(
            config.maxConcurrency,
            config.queueSize,
            config.queueTimeoutMs,
            metrics === null ? undefined : (instance, depth) => metrics.queueDepth(instance, depth),
          ),
    inflight: new InflightRequests(),
    deadlines: new Deadlines(DEADLINE_SWEEP_MS, (err) =>
      log.error({ err }, 'unhandled error ending a request at its deadline'),
    ),
    eventLayouts: new EventLayoutsByServer(),
    log,
    draining: false,
    baseUrl: '',
    version: deps.version,
    startedAt: iso(clock.now()),
    metrics,
    // The SDK is loaded only for a daemon that sends traces.
    tracing:
      config.otlp === null
        ? null
        : (await import('./tracing/tracer.js')).startTracing({ ...config.otlp, version: deps.version, log }),
    usageLog:
      config.usageLog === null
        ? null
        : await UsageLog.open(config.usageLog, clock, log, {
            modelOf: (id) => lifecycle.registry.instances.get(id)?.model ?? null,
            isLive: (id) => lifecycle.registry.keys.get(id)?.status === 'active',
          }),
    metricsUrl: null,
    storeLocation: store.location,
    storeStale: false,
    storeSync: () =>
      store.lastInSync === undefined
        ? null
        : storeSyncView({
            location: store.location,
            lastInSync: store.lastInSync(),
            now: clock.now(),
            maxStaleMs: config.maxStaleMs,
            stale: ctx.storeStale,
            holdsChores: store.holdsChores?.() ?? true,
            problem: store.syncProblem?.() ?? null,
          }),
    daemonReports: store.daemonReports === undefined ? null : (keyIds) => store.daemonReports!(keyIds),
  };
  // Per-key limits hold cluster-wide on a shared store (docs/scale-out.md).
  const limitExchange = ctx.keyLimits.exchange(() => lifecycle.registry.hasLimitedKey());
  if (limitExchange !== null) store.shareLimits?.(limitExchange);
  return ctx;
}
