import { access } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Server as SecureServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { type Clock, systemClock } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { type SecretSource, cryptoSecretSource } from '../src/domain/api-key.js';
import type { InstanceHealth } from '../src/services/instance-health.js';
import type { Registry } from '../src/services/registry.js';
import type { Store } from '../src/store/store.js';
import type { ModelProbe } from '../src/upstream/model-probe.js';
import { logAudit } from './audit-log.js';
import { buildContext } from './build-context.js';
import type { DaemonContext } from './context.js';
import { buildDataPlane } from './data-plane/build-data-plane.js';
import { watchRevocations } from './data-plane/revocation-watch.js';
import { followLifecycle } from './lifecycle-follow.js';
import { Listeners } from './listeners.js';
import { LiveSampler } from './live-sampler.js';
import { buildLogger } from './logger.js';
import { buildManagementPlane } from './management/build-management-plane.js';
import type { Metrics } from './metrics/metrics.js';
import { probeModelServers } from './model-probes.js';
import { type OpenedStore, openStore } from './open-store.js';
import { PackTimer, endPacksEndedWhileDown } from './pack-timer.js';
import { ensurePrivateHome, octal } from './private-home.js';
import { Shutdown } from './shutdown.js';
import { resolveGroup } from './socket-group.js';
import { StaleStoreWatch } from './stale-store-watch.js';
import { tlsReload } from './tls-reload.js';
import type { TlsFiles } from './tls.js';
import { UpstreamTokens } from './upstream-tokens.js';
import { UsageFlusher } from './usage-flusher.js';
import { type CollectGarbage, collectLoadGarbage } from './load-garbage.js';

export interface DaemonDeps {
  version: string;
  clock?: Clock;
  secrets?: SecretSource;
  store?: Store;
  logStream?: DestinationStream;
  logger?: Logger;
  /** --socket-group, already resolved (the CLI does it first, to answer a bad name as a usage error). */
  socketGid?: number;
  /** The full collection after a large store's load (load-garbage.ts). */
  collectGarbage?: CollectGarbage;
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
  if (config.testStartGate !== null) {
    log.info({ gate: config.testStartGate }, 'start-up held until the gate file exists');
    await untilExists(config.testStartGate);
  }
  // Both known once the store is open; the metrics read them at scrape time.
  let registry: Registry | undefined;
  let health: InstanceHealth | undefined;
  // prom-client is loaded only by the daemons that use it: less memory for the others.
  const metrics =
    config.metricsPort === null
      ? null
      : new (await import('./metrics/metrics.js')).Metrics({
          keyLabel: config.metricsKeyLabel,
          keys: () => registry,
          health: () => health?.statuses() ?? [],
          clock,
        });
  const secrets = deps.secrets ?? cryptoSecretSource;
  const opened = await openStore(config, { store: deps.store, clock, secrets, metrics, log });
  const { store, lifecycle, lock } = opened;
  try {
    registry = lifecycle.registry;
    const collectStart = performance.now();
    if (collectLoadGarbage(registry.keys.size, deps.collectGarbage))
      log.debug(
        { keys: registry.keys.size, ms: Math.round(performance.now() - collectStart) },
        "the store's load: its garbage collected",
      );
    const upstreamTokens = new UpstreamTokens();
    const probes = probeModelServers({ config, clock, registry, tokens: upstreamTokens, log });
    health = probes.health;
    const parts = { ...opened, ...probes, clock, log, metrics, upstreamTokens, tls, socketGid };
    return await assemble(config, deps.version, parts);
  } catch (err) {
    await store.close().catch(() => {});
    await lock?.release();
    throw err;
  }
}

interface Parts extends OpenedStore {
  clock: Clock;
  log: Logger;
  metrics: Metrics | null;
  tls: TlsFiles | null;
  socketGid: number | null;
  probe: ModelProbe;
  health: InstanceHealth;
  upstreamTokens: UpstreamTokens;
}

async function assemble(config: Config, version: string, parts: Parts): Promise<Daemon> {
  const { clock, log, store, lifecycle, health, upstreamTokens, tls } = parts;
  const ctx = await buildContext({ ...parts, config, version });
  logAudit({ ...parts, keyLimits: ctx.keyLimits, usageLog: ctx.usageLog });
  await upstreamTokens.loadAll(lifecycle.registry.instances.values(), log);
  await endPacksEndedWhileDown(lifecycle, log);

  const packTimer = new PackTimer(parts);
  const packTimerChanged = (): void => packTimer.schedule();
  const stopFollowing = followLifecycle({ lifecycle, tokens: upstreamTokens, packTimerChanged, log });
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

  const usage = new UsageFlusher({ usage: ctx.usage, lifecycle, store, clock, periodMs: config.usageFlushMs, log });
  // What runs on its own once listening, started in this order; stopped as the drain begins.
  const running = [
    packTimer,
    usage,
    new StaleStoreWatch({ store, clock, maxStaleMs: config.maxStaleMs, flag: ctx, log }),
    new LiveSampler(ctx.live, clock, (id) => lifecycle.registry.instances.has(id)),
    { start: () => health.start(config.probeIntervalMs), stop: () => health.stop() },
  ];
  const listeners = new Listeners({ ...parts, dataPlane, management, config, secure: tls !== null, at: ctx });
  const planes = { ctx, dataPlane, management };
  const shutdown = new Shutdown({ ...parts, ...planes, running, stopFollowing, stopWatching, usage, listeners });

  async function listen(): Promise<void> {
    if (listeners.began || shutdown.begun) throw new Error('This daemon has already listened, or is stopping.');
    try {
      await listeners.open();
    } catch (err) {
      await shutdown.abandon();
      throw err;
    }
    const { baseUrl, metricsUrl } = ctx;
    const serving = { baseUrl, socket: config.socket, store: store.location, version, metrics: metricsUrl };
    log.info(serving, 'ob-proxy serving');
    for (const part of running) part.start();
  }

  return {
    ...planes,
    listen,
    shutdown: (graceMs = config.graceMs) => shutdown.run(graceMs),
    reloadTls: tlsReload(config.tls, () => dataPlane.server as unknown as SecureServer, log),
  };
}

/** Resolves once `path` exists (OB_PROXY_TEST_START_GATE: a test's hold on start-up). */
async function untilExists(path: string): Promise<void> {
  for (;;) {
    try {
      await access(path);
      return;
    } catch {
      await sleep(10);
    }
  }
}
