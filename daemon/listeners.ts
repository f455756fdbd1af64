import { chmod } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { type Config, SETTINGS } from '../src/config.js';
import { settingLabel } from '../src/config-read.js';
import type { Metrics } from './metrics/metrics.js';
import { removeSocket } from './socket-file.js';
import { shareSocket } from './socket-group.js';

export interface ListenersDeps {
  dataPlane: Pick<FastifyInstance, 'listen' | 'server'>;
  management: Pick<FastifyInstance, 'listen'>;
  config: Pick<Config, 'host' | 'port' | 'socket' | 'metricsHost' | 'metricsPort'>;
  /** Serves TLS on the public port. */
  secure: boolean;
  /** --socket-group, resolved; null: the socket is the daemon user's alone. */
  socketGid: number | null;
  /** Served on a listener of its own when --metrics-port is set. */
  metrics: Metrics | null;
  /** Where the addresses are published (the daemon's context): each once it is bound. */
  at: { baseUrl: string; metricsUrl: string | null };
  log: Pick<Logger, 'warn'>;
}

/**
 * The daemon's listeners, bound in this order: the public port first, so that whoever reaches the
 * socket can always learn the base URL; the metrics listener; the management socket (owner only,
 * or shared with --socket-group). A failure is an error naming the setting to change; closing
 * what was bound is the caller's.
 */
export class Listeners {
  /** Set as `open()` begins: a daemon that never listened must not remove a socket it did not make. */
  began = false;
  private metricsListener: { url: string; close(): Promise<void> } | null = null;

  constructor(private readonly deps: ListenersDeps) {}

  async open(): Promise<void> {
    const { dataPlane, management, config, secure, socketGid, metrics, at, log } = this.deps;
    this.began = true;
    try {
      await dataPlane.listen({ host: config.host, port: config.port });
    } catch (err) {
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
    at.baseUrl = `${secure ? 'https' : 'http'}://${host}:${port}`;
    if (metrics !== null) {
      // prom-client's server is loaded only by the daemons that serve metrics.
      const { listenMetrics } = await import('./metrics/metrics-server.js');
      this.metricsListener = await listenMetrics(metrics, config.metricsHost, config.metricsPort ?? 0).catch(
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
    at.metricsUrl = this.metricsListener?.url ?? null;
  }

  closeMetrics(): Promise<void> {
    return this.metricsListener?.close() ?? Promise.resolve();
  }

  /** Removes the management socket, if this daemon listened (and so made it). */
  async removeSocket(): Promise<void> {
    if (this.began) await removeSocket(this.deps.config.socket);
  }
}
