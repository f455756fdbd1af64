import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { LifecycleService } from '../src/services/lifecycle.js';
import type { UnwrittenAtShutdownError } from '../src/services/unwritten.js';
import type { StoreLock } from '../src/store/store-lock.js';
import type { Store } from '../src/store/store.js';
import type { ModelProbe } from '../src/upstream/model-probe.js';
import type { ExchangeDeps, KeyCheckDeps } from './context.js';
import type { Listeners } from './listeners.js';
import type { UsageFlusher } from './usage-flusher.js';

/** The least time the last spans get to reach the collector at shutdown, however short the grace. */
const TRACE_FLUSH_MIN_MS = 1_000;

/** How often idle keep-alive connections are closed during the drain. */
const IDLE_SWEEP_MS = 50;

export interface ShutdownDeps {
  ctx: Pick<KeyCheckDeps, 'draining'> & Pick<ExchangeDeps, 'upstream' | 'tracing' | 'usageLog'>;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
  dataPlane: Pick<FastifyInstance, 'close' | 'server'>;
  management: Pick<FastifyInstance, 'close' | 'server'>;
  /** What runs on its own (timers, probes): stopped as the drain begins. */
  running: readonly { stop(): void }[];
  /** The lifecycle follow: an instance change no longer re-arms anything. */
  stopFollowing(): void;
  /** The revocation sweep: kept through the drain, so a key revoked then still ends its streams. */
  stopWatching(): void;
  usage: Pick<UsageFlusher, 'final'>;
  lifecycle: Pick<LifecycleService, 'close'>;
  store: Pick<Store, 'close'>;
  probe: Pick<ModelProbe, 'close'>;
  listeners: Pick<Listeners, 'closeMetrics' | 'removeSocket'>;
  lock: Pick<StoreLock, 'release'> | null;
}

/**
 * The daemon's end, once: no new requests, in-flight ones finish within the grace period (then
 * their connections are closed), the last spans and usage are written, and everything is closed,
 * the store's lock last. What cannot be written is lost with the process: said in the log and,
 * through the rejection, on stderr with a non-zero exit, never dropped silently.
 */
export class Shutdown {
  private stopping: Promise<void> | null = null;

  constructor(private readonly deps: ShutdownDeps) {}

  /** Whether the daemon is stopping or stopped (by `run` or `abandon`). */
  get begun(): boolean {
    return this.stopping !== null;
  }

  /** Drains within `graceMs`, then writes and closes; resolves when the daemon has fully stopped. */
  run(graceMs: number): Promise<void> {
    this.stopping ??= this.sequence(graceMs);
    return this.stopping;
  }

  /**
   * After a listen() that failed: everything is closed at once, with nothing to drain or write,
   * and a later `run()` has nothing left to do.
   */
  async abandon(): Promise<void> {
    const { ctx, dataPlane, running, probe, listeners, store, lock } = this.deps;
    this.stopping ??= Promise.resolve();
    this.deps.stopWatching();
    for (const r of running) r.stop();
    await probe.close();
    await listeners.closeMetrics();
    this.deps.stopFollowing();
    await dataPlane.close();
    await ctx.tracing?.stop(TRACE_FLUSH_MIN_MS);
    await ctx.usageLog?.close();
    await listeners.removeSocket();
    await store.close().catch(() => {});
    await lock?.release();
  }

  private async sequence(graceMs: number): Promise<void> {
    const { ctx, log, management, running, usage, lifecycle, store, probe, listeners, lock } = this.deps;
    ctx.draining = true;
    for (const r of running) r.stop();
    this.deps.stopFollowing();
    log.info({ graceMs }, 'draining: no new requests, in-flight ones may finish');
    const drainStart = performance.now();
    await this.drain(graceMs);
    // Every exchange is over, so every span ended: they go to the collector in what is left of
    // the grace period (at least TRACE_FLUSH_MIN_MS), and a collector that does not take them
    // then does not hold the shutdown.
    await ctx.tracing?.stop(Math.max(TRACE_FLUSH_MIN_MS, graceMs - (performance.now() - drainStart)));
    // Every exchange is over: its usage line is the last one.
    await ctx.usageLog?.close();
    this.deps.stopWatching();
    let failure: Error | null = null;
    const lost = await usage.final();
    try {
      await lifecycle.close();
    } catch (err) {
      failure = err as Error;
    }
    if (lost !== null) {
      const note = `Usage counters of ${lost.keys} key(s) since the last flush were not written.`;
      failure =
        failure === null
          ? new Error(`The store could not be written at shutdown (${(lost.err as Error).message}) ${note}`)
          : Object.assign(failure, { message: `${failure.message} ${note}` });
    }
    await store.close().catch((err: unknown) => {
      failure ??= err as Error;
    });
    await listeners.closeMetrics();
    await probe.close();
    management.server.closeAllConnections();
    await management.close();
    await listeners.removeSocket();
    await lock?.release();
    if (failure !== null) {
      log.error({ unwritten: (failure as Partial<UnwrittenAtShutdownError>).unwritten }, failure.message);
      throw failure;
    }
    log.info('stopped');
  }

  /**
   * Closes the public port and waits for in-flight exchanges, at most `graceMs`; then closes the
   * connections left and aborts their upstream requests.
   */
  private async drain(graceMs: number): Promise<void> {
    const { ctx, log, dataPlane } = this.deps;
    const drained = dataPlane.close();
    // A keep-alive connection whose last response ends during the drain would hold close() open
    // until its keep-alive time-out (65 s), so the grace period always ran out: close connections
    // as soon as they are idle.
    const idleSweep = setInterval(() => dataPlane.server.closeIdleConnections(), IDLE_SWEEP_MS);
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
  }
}
