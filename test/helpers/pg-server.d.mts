/** Types of pg-server.mjs. */
export interface PgServer {
  /** The server's temp folder: its data, log and Unix socket. */
  readonly dir: string;
  readonly port: number;
  /** postgres://postgres@127.0.0.1:PORT/postgres (trust). */
  readonly url: string;
  /** The running postmaster's pid (undefined while it is down). */
  postmasterPid(): number | undefined;
  /** Starts it again on the same port and data (after kill9). */
  start(): Promise<void>;
  /** SIGKILL to the postmaster and every backend: a crash, not a shutdown. Resolves once the port is free. */
  kill9(): Promise<void>;
  /** Immediate stop, and the folder removed. */
  destroy(): Promise<void>;
}

export function startPgServer(opts?: { settings?: string[] }): Promise<PgServer>;
