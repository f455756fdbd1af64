/** What the relay tells a trace span: a plain answer's body, a stream's reads, and the exchange's error code. */
export interface RelayTrace {
  answer(body: Record<string, unknown>): void;
  read(chunk: Buffer): void;
  error(code: string): void;
}

/** Told by the relay what only it sees of the model server (metrics/request-observer.ts). */
export interface RelayObserver {
  /** The model server's response headers arrived. */
  responseStarted(status: number): void;
  /** The exchange failed because of the model server (an `upstream_*` code). */
  upstreamFailed(code: string): void;
}
