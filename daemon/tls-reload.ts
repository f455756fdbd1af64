import type { Server as SecureServer } from 'node:tls';
import type { Logger } from 'pino';
import type { TlsFiles } from './tls.js';

/**
 * SIGHUP's certificate reload. One reload runs at a time: a SIGHUP that arrives while one is
 * under way is folded into a single reload started when it ends (so the newest files are read,
 * and a burst of signals reads them once), and the log says so. With the reads bounded in time
 * and taken one at a time (operator-file.ts), a file that never answers costs one threadpool
 * thread, however many SIGHUPs follow, and never the store's writes.
 */
export class TlsReloader {
  private current: Promise<boolean> | null = null;
  private queued: Promise<boolean> | null = null;

  constructor(
    private readonly files: { cert: string; key: string },
    /** Reads and checks the pair (tls.ts `loadTls`). */
    private readonly load: (files: { cert: string; key: string }) => Promise<TlsFiles>,
    private readonly apply: (next: TlsFiles) => void,
    private readonly log: Pick<Logger, 'info' | 'warn' | 'error'>,
  ) {}

  /** Resolves true once a reload that began after this call has put a new pair in place. */
  reload(): Promise<boolean> {
    if (this.current === null) return this.start();
    this.log.warn(
      { cert: this.files.cert },
      this.queued === null
        ? 'TLS reload already under way: one more starts when it ends'
        : 'TLS reload already under way, and one more is pending: this SIGHUP is folded into it',
    );
    this.queued ??= this.current.then(() => {
      this.queued = null;
      return this.start();
    });
    return this.queued;
  }

  private start(): Promise<boolean> {
    const run = this.once().finally(() => {
      if (this.current === run) this.current = null;
    });
    this.current = run;
    return run;
  }

  private async once(): Promise<boolean> {
    try {
      this.apply(await this.load(this.files));
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'TLS reload failed: still serving the previous certificate');
      return false;
    }
    this.log.info({ cert: this.files.cert }, 'TLS certificate reloaded: new connections get it, open ones keep theirs');
    return true;
  }
}

/**
 * `Daemon.reloadTls` for a public server: false when there is nothing to reload (no --tls-cert).
 * The reloader is made once, in the first signal's turn, so a burst of signals shares it.
 */
export function tlsReload(
  files: { cert: string; key: string } | null,
  server: () => SecureServer,
  log: Pick<Logger, 'info' | 'warn' | 'error'>,
): () => Promise<boolean> {
  let reloader: Promise<TlsReloader> | null = null;
  return async () => {
    if (files === null) return false;
    reloader ??= import('./tls.js').then(
      ({ loadTls }) =>
        new TlsReloader(files, loadTls, (next) => server().setSecureContext({ cert: next.cert, key: next.key }), log),
    );
    return (await reloader).reload();
  };
}
