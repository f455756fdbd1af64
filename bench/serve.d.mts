import type { ChildProcess } from 'node:child_process';

/** This checkout's built CLI: the file users run. */
export declare const OB_BIN: string;

/** A TCP port free on 127.0.0.1 at the moment of asking. */
export declare function freePort(): Promise<number>;

export interface ServeOptions {
  /** The daemon's home folder (store, socket). */
  home: string;
  /** The CLI to run (default this checkout's dist/bin/ob-proxy.js). */
  bin?: string;
  /** More arguments after `serve --home H --port P`. */
  args?: string[];
  /** Added to the environment (NO_COLOR is set). */
  env?: Record<string, string>;
  /** Node's own flags, before the CLI. */
  nodeArgs?: string[];
  /** A command the daemon runs under (valgrind and its flags). */
  launcher?: string[];
  /**
   * 'pipe': port 0 and stdout read for the serving line; 'ignore': a free port, polled; a file
   * descriptor: as 'ignore', stdout written there.
   */
  logs?: 'pipe' | 'ignore' | number;
  /** How long to wait for the daemon to serve (default 15 s). */
  timeoutMs?: number;
}

export interface ServedDaemon {
  proc: ChildProcess;
  home: string;
  /** `http://127.0.0.1:PORT` of the public listener. */
  baseUrl: string;
  /** Every stdout line so far (JSON log lines); empty with logs 'ignore'. */
  lines: string[];
  stderr: string[];
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  /** Calls `w` after each read of its output and at exit; returns what stops it. */
  watch(w: () => void): () => void;
  /** Sends `signal` (default SIGTERM) unless it has exited; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `ob-proxy serve` and resolves once it serves. */
export declare function startServe(opts: ServeOptions): Promise<ServedDaemon>;
