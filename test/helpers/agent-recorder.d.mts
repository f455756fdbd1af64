/** Types of agent-recorder.mjs. */
export interface RecordedExchange {
  readonly method: string;
  /** The path with its query string, as the client sent it. */
  readonly path: string;
  /** The request's headers (lower case), hop-by-hop ones and Host left out. */
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  readonly receivedAt: number;
  /** The answer's status, once its headers came (null before). */
  readonly status: number | null;
  /** The answer's first 256 KiB, once it ended. */
  readonly answer: string | null;
  readonly endedAt: number | null;
  /** Answered by `script`, not sent upstream. */
  readonly scripted: boolean;
  /** The client closed the connection before the answer's end. */
  readonly clientLeft: boolean;
}

export interface ScriptedAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface Recorder {
  /** http://127.0.0.1:PORT: give it to the agent as its server's root. */
  readonly url: string;
  readonly exchanges: readonly RecordedExchange[];
  /** Resolves once `pred(exchanges)` holds (checked at each arrival and end); rejects after `ms`, naming `what`. */
  until(pred: (xs: readonly RecordedExchange[]) => boolean, ms: number, what: string): Promise<void>;
  close(): Promise<void>;
}

export function startRecorder(
  upstream: string,
  options?: { script?: (x: RecordedExchange) => ScriptedAnswer | null },
): Promise<Recorder>;

export interface OutboundCatcher {
  /** http://127.0.0.1:PORT: the agents' HTTP_PROXY and HTTPS_PROXY. */
  readonly url: string;
  /** Every request an agent tried to send past 127.0.0.1 (`CONNECT host:443`, `GET http://…`). */
  readonly hits: readonly string[];
  close(): Promise<void>;
}

export function startOutboundCatcher(): Promise<OutboundCatcher>;
