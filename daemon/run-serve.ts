import type { Config } from '../src/config.js';
import { type Daemon, type DaemonDeps, startDaemon } from './build-daemon.js';
import { removePidFile, writePidFile } from './pid-file.js';

export interface ServeExtras {
  /** Written once serving, removed at exit. */
  pidFile?: string | undefined;
}

/** A bad --socket-group is a usage error: resolved before anything starts. */
export { resolveGroup } from './socket-group.js';

/**
 * `ob-proxy serve`: start, then on SIGTERM/SIGINT drain within the grace period and resolve.
 * A second signal stops waiting for the grace period.
 */
export async function runServe(config: Config, deps: DaemonDeps, extras: ServeExtras = {}): Promise<void> {
  // The handlers go in before the daemon listens: a supervisor may send SIGTERM as soon as the
  // "serving" line appears, and a signal that found no handler would end the process by Node's
  // default action, without the drain or the store's final write. A signal during start-up is
  // held and acted on once the daemon is up.
  let daemon: Daemon | undefined;
  let signals = 0;
  let onStopped!: () => void;
  let onStopFailed!: (err: unknown) => void;
  const stopped = new Promise<void>((resolve, reject) => {
    onStopped = resolve;
    onStopFailed = reject;
  });
  const stop = (d: Daemon): void => {
    const grace = signals > 1 ? 0 : config.graceMs;
    void d.shutdown(grace).then(onStopped, onStopFailed);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (daemon === undefined) {
      // A second signal while still starting (a store that does not answer, say) is the
      // operator insisting: nothing has been served yet, so nothing is left to drain.
      if (signals > 1) process.exit(signal === 'SIGINT' ? 130 : 143);
      return;
    }
    daemon.ctx.log.info({ signal }, 'signal received');
    stop(daemon);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    daemon = await startDaemon(config, deps);
  } catch (err) {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    throw err;
  }
  // A shutdown that could not write everything rejects: the CLI prints what was lost on stderr
  // and exits non-zero, so a supervisor or an operator sees it.
  if (signals > 0) {
    daemon.ctx.log.info({ signals }, 'signal received while starting');
    stop(daemon);
  }
  const started = daemon;
  // SIGHUP reloads the certificate (systemctl reload). Handled with or without TLS: a reload sent
  // to a daemon that has nothing to reload must not stop it.
  process.on('SIGHUP', () => {
    if (config.tls === null) started.ctx.log.info('SIGHUP: nothing to reload (no --tls-cert)');
    else void started.reloadTls();
  });
  if (extras.pidFile !== undefined) {
    try {
      await writePidFile(extras.pidFile);
    } catch (err) {
      await started.shutdown(0);
      throw err;
    }
  }
  try {
    await stopped;
  } finally {
    if (extras.pidFile !== undefined) await removePidFile(extras.pidFile);
  }
}
