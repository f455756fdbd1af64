import { chmod } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Server as SecureServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { type Clock, iso, systemClock } from '../src/clock.js';
import { type Config, SETTINGS, settingLabel } from '../src/config.js';
import { type SecretSource, cryptoSecretSource } from '../src/domain/api-key.js';
import { InstanceHealth } from '../src/services/instance-health.js';
import { LifecycleService } from '../src/services/lifecycle.js';
import { LiveStats } from '../src/services/live-stats.js';
import type { UnwrittenAtShutdownError } from '../src/services/unwritten.js';
import { KeyLimiter, LIMIT_SYNC_MS } from '../src/services/key-limiter.js';
import { UsageTracker } from '../src/services/usage.js';
import { FileStore } from '../src/store/file-store.js';
import type { Store } from '../src/store/store.js';
import { storeFiles } from '../src/store/store-files.js';
import { isPostgresUrl } from '../src/store/store-url.js';
import { ModelProbe } from '../src/upstream/model-probe.js';
import { UpstreamClient } from '../src/upstream/upstream-client.js';
import { EventLayoutsByServer } from '../src/wire/event-layouts.js';
import { storeSyncView } from '../src/wire/views.js';
import type { DaemonContext } from './context.js';
import { Admission } from './data-plane/admission.js';
import { ByteBudget } from '../src/services/byte-budget.js';
import { BadKeyLimiter } from './data-plane/bad-key-limiter.js';
import { buildDataPlane } from './data-plane/build-data-plane.js';
import { Deadlines } from './data-plane/deadlines.js';
import { InflightRequests, watchRevocations } from './data-plane/inflight.js';
import { followLifecycle } from './lifecycle-follow.js';
import { buildLogger } from './logger.js';
import { buildManagementPlane } from './management/build-management-plane.js';
import { ensurePrivateHome, makeFolder, octal } from './private-home.js';
import { prepareSocketPath, removeSocket } from './socket-file.js';
import { resolveGroup, shareSocket } from './socket-group.js';
import { type StoreLock, lockHostOf, lockStore } from '../src/store/store-lock.js';
import { UpstreamTokens } from './upstream-tokens.js';
import type { Metrics } from './metrics/metrics.js';
import type { TlsFiles } from './tls.js';

/** The least time the last spans get to reach the collector at shutdown, however short the grace. */
const TRACE_FLUSH_MIN_MS = 1_000;

export interface DaemonDeps {
  version: string;
  clock?: Clock;
  secrets?: SecretSource;
  store?: Store;
  logStream?: DestinationStream;
  logger?: Logger;
  /** --socket-group, already resolved (the CLI does it first, to answer a bad name as a usage error). */
  socketGid?: number;
}

/**
 * Both planes built and ready: `dataPlane.inject()` and `management.inject()` answer before
 * `listen()`, with nothing bound and no timer armed, so a test can drive a whole daemon in process.
 */
export interface Daemon {
  ctx: DaemonContext;
  dataPlane: FastifyInstance;
  management: FastifyInstance;
  /**
   * Binds the public port, the metrics listener and the management socket, then starts the
   * probes and the timers (pack ends, usage flushes, staleness, live samples). Once only. On
   * failure everything is closed (store, lock) and the daemon cannot be used again.
   */
  listen(): Promise<void>;
  /** Resolves when the daemon has fully stopped (after shutdown). */
  shutdown(graceMs?: number): Promise<void>;
  /**
   * Reads --tls-cert and --tls-key again and serves them to new connections; connections and
   * streams already open keep theirs. A pair that cannot serve is logged and the old one kept.
   * False when nothing was reloaded.
   */
  reloadTls(): Promise<boolean>;
}

/** Opens the store, binds the socket and the public port, and starts the daemon's timers. */
export async function startDaemon(config: Config, deps: DaemonDeps): Promise<Daemon> {
  const daemon = await buildDaemon(config, deps);
  await daemon.listen();
  return daemon;
}

/**
 * Opens the store and builds both planes, ready for `inject()`; binds nothing (the socket path
 * is checked, not bound) and arms no timer until `listen()`.
 */
export async function buildDaemon(config: Config, deps: DaemonDeps): Promise<Daemon> {
  const clock = deps.clock ?? systemClock;
  const log = deps.logger ?? (await buildLogger(config.logLevel, deps.logStream, config.logFormat ?? 'json'));
  // Before anything is opened: a certificate that cannot serve, or an unknown group, is a start-up error.
  const tls = config.tls === null ? null : await (await import('./tls.js')).loadTls(config.tls);
  const socketGid = deps.socketGid ?? (config.socketGroup === null ? null : await resolveGroup(config.socketGroup));
  const loosened = await ensurePrivateHome(config.home);
  if (loosened !== null)
    log.warn(
      { home: config.home, was: octal(loosened), now: '0700' },
      `the home folder was mode ${octal(loosened)}, readable by other users: made it 0700`,
    );
  // Several daemons on one PostgreSQL are the point of that store: no lock, no files of its own.
  const shared = isPostgresUrl(config.store);
  if (!shared) await makeFolder(dirname(config.store), "store's folder", SETTINGS.store, 'a path in a folder');
  // Before anything is bound or read: a second daemon on this store must change nothing.
  const lock = deps.store === undefined && !shared ? await lockStore(config.store, lockHostOf(process)) : null;
  let store: Store | undefined;
  let lifecycle: LifecycleService | undefined;
  // Made once the registry exists; the metrics read it at scrape time.
  let health: InstanceHealth | undefined;
  // prom-client and pg are loaded only by the daemons that use them: less memory for the others.
  const metrics =
    config.metricsPort === null
      ? null
      : new (await import('./metrics/metrics.js')).Metrics({
          keyLabel: config.metricsKeyLabel,
          keys: () => lifecycle?.registry,
          health: () => health?.statuses() ?? [],
          clock,
        });
  try {
    await prepareSocketPath(config.socket, shared ? [] : storeFiles(config.store));
    store =
      deps.store ??
      (shared
        ? new (await import('../src/store/postgres-store.js')).PostgresStore(config.store, {
            catchupMs: config.storeCatchupMs,
            notify: config.storeNotify,
            onNotice: (message) => log.warn({ store: 'postgres' }, message),
            journalPath: join(config.home, 'postgres.revocations'),
            pid: process.pid,
            maxStaleMs: config.maxStaleMs,
          })
        : new FileStore(config.store, {
            onNotice: (message) => log.warn({ store: config.store }, message),
            ...(config.storeFoldBytes === null ? {} : { foldBytes: config.storeFoldBytes }),
          }));
    if (metrics !== null)
      store = (await import('./metrics/timed-store.js')).timedStore(store, (s) => metrics.storeWrite(s));
    lifecycle = await LifecycleService.open({
      store,
      clock,
      secrets: deps.secrets ?? cryptoSecretSource,
      models: config.models,
    });
  } catch (err) {
    await store?.close().catch(() => {});
    await lock?.release();
    throw err;
  }
  try {
    const registry = lifecycle.registry;
    const upstreamTokens = new UpstreamTokens();
    const probe = new ModelProbe({ timeoutMs: config.probeTimeoutMs, maxBytes: 1024 * 1024 });
    health = new InstanceHealth({
      clock,
      probe: (endpoint, model, token) => probe.probe(endpoint, model, token),
      token: (id) => upstreamTokens.get(id),
      instances: () => registry.instances.values(),
      instance: (id) => registry.instances.get(id),
      changed: (inst, now, before) => {
        if (now.status === 'reachable')
          log.info(
            {
              instance: inst.id,
              endpoint: inst.endpoint,
              health: now.status,
              ...(before === null ? {} : { was: before.status }),
            },
            'model server probe',
          );
        else
          log.warn(
            { instance: inst.id, endpoint: inst.endpoint, health: now.status, error: now.error },
            'model server probe failed',
          );
      },
    });
    return await assemble(config, deps, {
      clock,
      log,
      store,
      lifecycle,
      lock,
      metrics,
      probe,
      health,
      upstreamTokens,
      tls,
      socketGid,
    });
  } catch (err) {
    await store.close().catch(() => {});
    await lock?.release();
    throw err;
  }
}

interface Opened {
  clock: Clock;
  log: Logger;
  store: Store;
  lifecycle: LifecycleService;
  lock: StoreLock | null;
  metrics: Metrics | null;
  tls: TlsFiles | null;
  socketGid: number | null;
  probe: ModelProbe;
  health: InstanceHealth;
  upstreamTokens: UpstreamTokens;
}

async function assemble(config: Config, deps: DaemonDeps, opened: Opened): Promise<Daemon> {
  const { clock, log, store, lifecycle, lock, metrics, probe, health, upstreamTokens, tls, socketGid } = opened;

  let packTimer: NodeJS.Timeout | undefined;
  let listening = false;
  const ctx: DaemonContext = {
    config,
    clock,
    lifecycle,
    usage: new UsageTracker(lifecycle.usageCounters),
    live: new LiveStats(clock.now()),
    upstreamTokens,
    health,
    upstream: new UpstreamClient({ connectTimeoutMs: config.connectTimeoutMs }),
    badKeys: new BadKeyLimiter(config.badKeyLimit),
    bodies: new ByteBudget(config.bodyMemory, config.bodyMemoryPerKey),
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
    deadlines: new Deadlines(250, (err) => log.error({ err }, 'unhandled error ending a request at its deadline')),
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
        : (await import('./tracing/tracer.js')).startTracing({
            ...config.otlp,
            version: deps.version,
            log,
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
  // The audit trail in the log too, event by event: key creations and revocations (by hand, by a
  // stop, by a pack end with no command), instance changes. Never a secret: events hold none.
  // Changes heard from other daemons of a shared store are logged as such, and counted by the
  // daemon that made them only, so a cluster's sum of revocations is not multiplied by its size.
  lifecycle.onChange((e, origin) => {
    log.info(
      {
        audit: e.type,
        instance: e.instance,
        ...(e.keyId === undefined ? {} : { key: e.keyId, keyName: e.keyName }),
        ...(e.state === undefined ? {} : { state: e.state }),
        ...(e.reason === undefined ? {} : { reason: e.reason }),
        ...(e.limits === undefined ? {} : { limits: e.limits }),
        seq: e.seq,
        ...(origin === 'remote' ? { origin } : {}),
      },
      'audit',
    );
    if (e.type === 'key.revoked' && e.keyId !== undefined) ctx.keyLimits.forget(e.keyId);
    if (metrics !== null && e.type === 'key.revoked' && origin !== 'remote') metrics.revoked(e.reason ?? 'manual');
  });

  // Packs are ended by the daemon's own clock; the request path also checks, between ticks.
  function schedulePackTimer(): void {
    clearTimeout(packTimer);
    const next = lifecycle.nextPackEnd();
    // Before listen(), no timer: the request path checks pack ends itself, and listen() arms it.
    if (next === null || ctx.draining || !listening) return;
    // setTimeout holds at most 2^31-1 ms (24.8 days) and fires at once for more: cap it, and a
    // pack that ends later is simply re-armed when the capped timer fires. A daemon of a shared
    // store that does not hold its chores looks again every second, to take over from one that died.
    const wait = Math.max(0, next - clock.now());
    const delay = Math.min(wait === 0 && store.holdsChores?.() === false ? 1000 : wait + 5, 2 ** 31 - 1);
    packTimer = setTimeout(() => {
      lifecycle
        .endDuePacks()
        .then(
          (ended) => {
            for (const i of ended) log.info({ instance: i.id }, 'pack ended: instance stopped, keys revoked');
          },
          (err: unknown) => log.error({ err }, 'ending packs failed'),
        )
        .finally(schedulePackTimer);
    }, delay);
  }

  for (const inst of lifecycle.registry.instances.values()) {
    // A missing token file must not keep the daemon down: the instance's requests will be
    // refused by its model server, and the operator is told here.
    await ctx.upstreamTokens
      .load(inst)
      .catch((err: unknown) =>
        log.error({ instance: inst.id, err: (err as Error).message }, 'upstream token not loaded'),
      );
  }
  // A store that cannot be written now does not keep the daemon down: the packs are ended in
  // memory (and in the revocation journal) all the same, and the write is retried.
  await lifecycle.endDuePacks().then(
    (ended) => {
      for (const i of ended) log.info({ instance: i.id }, 'pack ended while the daemon was down: keys revoked');
    },
    (err: unknown) =>
      log.error(
        { err: (err as Error).message },
        'ending packs that ran out while the daemon was down: not written yet',
      ),
  );

  // The periodic flush being written, if any: one at a time, and the shutdown waits for it, so
  // that counters a failed write puts back are written (or reported lost) by the shutdown.
  let flushing: Promise<void> | null = null;
  const flushUsage = (): Promise<void> => {
    if (flushing !== null) return flushing;
    const dirty = ctx.usage.takeDirty();
    const write = Promise.resolve()
      .then(() => lifecycle.flushUsage(dirty))
      .catch((err: unknown) => {
        ctx.usage.restore(dirty);
        log.warn({ err: (err as Error).message }, 'usage flush failed; will retry');
      })
      .finally(() => {
        if (flushing === write) flushing = null;
      });
    flushing = write;
    return write;
  };

  const stopFollowing = followLifecycle({
    lifecycle,
    tokens: upstreamTokens,
    packTimerChanged: schedulePackTimer,
    log,
  });

  // Also during the drain: a key revoked then still ends its streams. Its sweep needs no listener.
  const stopWatching = watchRevocations(ctx);

  const management = buildManagementPlane(ctx);
  const dataPlane = buildDataPlane(ctx, tls);
  try {
    await Promise.all([dataPlane.ready(), management.ready()]);
  } catch (err) {
    stopWatching();
    stopFollowing();
    throw err;
  }

  let usageTimer: NodeJS.Timeout | undefined;
  let staleTimer: NodeJS.Timeout | undefined;
  let liveTimer: NodeJS.Timeout | undefined;
  let metricsListener: { url: string; close(): Promise<void> } | null = null;
  const stopTimers = (): void => {
    health.stop();
    clearInterval(liveTimer);
    clearTimeout(packTimer);
    clearInterval(usageTimer);
    clearInterval(staleTimer);
  };
  const abandon = async (): Promise<void> => {
    // Everything is closed here: a shutdown() after a failed listen() has nothing left to do.
    stopping ??= Promise.resolve();
    stopWatching();
    stopTimers();
    await probe.close();
    await metricsListener?.close();
    stopFollowing();
    await dataPlane.close();
    await ctx.tracing?.stop(TRACE_FLUSH_MIN_MS);
    await removeSocket(config.socket);
    await store.close().catch(() => {});
    await lock?.release();
  };

  function startTimers(): void {
    schedulePackTimer();
    usageTimer = setInterval(() => {
      void flushUsage();
      // A shared store: a revocation written late still reaches the other daemons soon after the
      // database is back, not only with this daemon's next management change.
      if (store.subscribe !== undefined) lifecycle.retryUnwritten().catch(() => {});
    }, config.usageFlushMs);

    // Bounded staleness (docs/contract.md §4): a flag the request path reads, set here, so a request
    // never computes it, and a change of state is logged once.
    const lastInSync = store.lastInSync?.bind(store);
    staleTimer =
      lastInSync === undefined
        ? undefined
        : setInterval(() => {
            const behindMs = clock.now() - lastInSync();
            const stale = behindMs > config.maxStaleMs;
            if (stale === ctx.storeStale) return;
            ctx.storeStale = stale;
            if (stale)
              log.error(
                { store: store.location, behindMs, maxStaleMs: config.maxStaleMs },
                'out of sync with the store for longer than --max-stale: refusing every key with 503 store_unreachable until in sync again',
              );
            else log.info({ store: store.location }, 'in sync with the store again: serving keys');
          }, 100);
    staleTimer?.unref();

    // The console's live view: rates from counters in memory, sampled off the request path.
    liveTimer = setInterval(() => ctx.live.sample(clock.now(), (id) => lifecycle.registry.instances.has(id)), 1000);
    liveTimer.unref();
    health.start(config.probeIntervalMs);
  }

  async function listen(): Promise<void> {
    if (listening || stopping !== null) throw new Error('This daemon has already listened, or is stopping.');
    listening = true;
    // The public port first: whoever reaches the socket can then always learn the base URL.
    try {
      await dataPlane.listen({ host: config.host, port: config.port });
    } catch (err) {
      await abandon();
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
        throw new Error(
          `Cannot listen on ${config.host}:${config.port} (${code}): ${code === 'EADDRINUSE' ? 'something else holds that port' : 'the address or port is not available'}. Choose another with ${settingLabel(SETTINGS.port)} / ${settingLabel(SETTINGS.host)}.`,
          { cause: err },
        );
      }
      throw err;
    }
    const addr = dataPlane.server.address();
    const port = typeof addr === 'object' && addr !== null ? addr.port : config.port;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    ctx.baseUrl = `${tls === null ? 'http' : 'https'}://${host}:${port}`;
    try {
      if (metrics !== null) {
        const { listenMetrics } = await import('./metrics/metrics-server.js');
        metricsListener = await listenMetrics(metrics, config.metricsHost, config.metricsPort ?? 0).catch(
          (err: unknown) => {
            const code = (err as NodeJS.ErrnoException).code ?? 'error';
            throw new Error(
              `Cannot serve metrics on ${config.metricsHost}:${String(config.metricsPort)} (${code}). Choose another with --metrics-port / --metrics-host.`,
              { cause: err },
            );
          },
        );
      }
      await management.listen({ path: config.socket });
      await chmod(config.socket, 0o600);
      if (socketGid !== null) {
        const unreachable = await shareSocket(config.socket, socketGid);
        if (unreachable !== null) log.warn({ socket: config.socket, gid: socketGid }, unreachable);
      }
    } catch (err) {
      await abandon();
      throw err;
    }
    ctx.metricsUrl = metricsListener?.url ?? null;
    log.info(
      {
        baseUrl: ctx.baseUrl,
        socket: config.socket,
        store: store.location,
        version: deps.version,
        metrics: ctx.metricsUrl,
      },
      'ob-proxy serving',
    );
    startTimers();
  }

  let stopping: Promise<void> | null = null;
  async function shutdown(graceMs = config.graceMs): Promise<void> {
    stopping ??= (async () => {
      ctx.draining = true;
      stopTimers();
      stopFollowing();
      log.info({ graceMs }, 'draining: no new requests, in-flight ones may finish');
      const drainStart = performance.now();
      const drained = dataPlane.close();
      // A keep-alive connection whose last response ends during the drain would hold close()
      // open until its keep-alive time-out (65 s), so the grace period always ran out: close
      // connections as soon as they are idle.
      const idleSweep = setInterval(() => dataPlane.server.closeIdleConnections(), 50);
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<'expired'>((resolve) => {
        timer = setTimeout(() => resolve('expired'), graceMs);
      });
      const outcome = await Promise.race([drained.then(() => 'drained' as const), expired]);
      clearTimeout(timer);
      clearInterval(idleSweep);
      if (outcome === 'expired') {
        log.warn('grace period over: closing remaining connections');
        dataPlane.server.closeAllConnections();
        await ctx.upstream.destroy();
        await drained;
      } else {
        await ctx.upstream.close();
      }
      // Every exchange is over, so every span ended: they go to the collector in what is left of
      // the grace period (at least TRACE_FLUSH_MIN_MS), and a collector that does not take them
      // then does not hold the shutdown.
      await ctx.tracing?.stop(Math.max(TRACE_FLUSH_MIN_MS, graceMs - (performance.now() - drainStart)));
      stopWatching();
      // What cannot be written now is lost with the process: said in the log and, through the
      // rejection, on stderr with a non-zero exit, never dropped silently.
      let failure: Error | null = null;
      const dirty = ctx.usage.takeDirty();
      let usageLost: unknown = null;
      const lose = (err: unknown): void => {
        usageLost = err;
      };
      await lifecycle.flushUsage(dirty).catch(lose);
      // A periodic flush still being written may yet fail and put its counters back: they are
      // written now too, or reported lost with the rest, never left in memory as the process ends.
      await flushing;
      const back = ctx.usage.takeDirty();
      dirty.push(...back);
      if (usageLost === null) await lifecycle.flushUsage(back).catch(lose);
      try {
        await lifecycle.close();
      } catch (err) {
        failure = err as Error;
      }
      if (usageLost !== null) {
        const note = `Usage counters of ${dirty.length} key(s) since the last flush were not written.`;
        failure =
          failure === null
            ? new Error(`The store could not be written at shutdown (${(usageLost as Error).message}) ${note}`)
            : Object.assign(failure, { message: `${failure.message} ${note}` });
      }
      await store.close().catch((err: unknown) => {
        failure ??= err as Error;
      });
      await metricsListener?.close();
      await probe.close();
      management.server.closeAllConnections();
      await management.close();
      // A daemon that never listened must not remove a socket it did not make.
      if (listening) await removeSocket(config.socket);
      await lock?.release();
      if (failure !== null) {
        log.error({ unwritten: (failure as Partial<UnwrittenAtShutdownError>).unwritten }, failure.message);
        throw failure;
      }
      log.info('stopped');
    })();
    return stopping;
  }

  // One reload at a time, SIGHUPs during one folded into the next (tls-reload.ts); the reloader
  // is made once, in the first signal's turn, so a burst of signals shares it.
  let reloader: Promise<import('./tls-reload.js').TlsReloader> | null = null;
  async function reloadTls(): Promise<boolean> {
    const files = config.tls;
    if (files === null) return false;
    reloader ??= Promise.all([import('./tls-reload.js'), import('./tls.js')]).then(
      ([{ TlsReloader }, { loadTls }]) =>
        new TlsReloader(
          files,
          loadTls,
          (next) => (dataPlane.server as unknown as SecureServer).setSecureContext({ cert: next.cert, key: next.key }),
          log,
        ),
    );
    return (await reloader).reload();
  }

  return { ctx, dataPlane, management, listen, shutdown, reloadTls };
}
