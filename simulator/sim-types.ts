/**
 * Types of the simulated Ollama server (`ob-proxy simulate`). Re-exported by `simulator.ts`.
 */
import type { Flavor } from './sim-agent.js';

const PLAIN_FAIL_MODES = [
  'none',
  'http-error',
  'html-500',
  'invalid-json',
  'hang',
  'reset-before-headers',
  'hang-mid-stream',
  'drop-mid-stream',
  'eof-mid-stream',
  'garbage',
  'slow-drip',
] as const;

/** Hostile model servers (sim-hostile.ts): answers a proxy must bound or refuse. */
export const HOSTILE_FAIL_MODES = [
  'endless-line',
  'endless-body',
  'huge-body',
  'huge-error',
  'bad-status',
  'hang-after-done',
  'error-event',
  'broken-error-event',
  'named-error-event',
  'sse-fields',
  'named-event',
  'html-frames',
] as const;

// One list: a mode named here is accepted by the directive parser, and is hostile if it is in
// HOSTILE_FAIL_MODES (three copies could disagree).
export const FAIL_MODES = [...PLAIN_FAIL_MODES, ...HOSTILE_FAIL_MODES] as const;

export type FailMode = (typeof FAIL_MODES)[number];

export interface SimulatorOptions {
  /** Model ids served, e.g. `['gemma4:26b']`. */
  models: string[];
  /** Delay before headers (stream) / before the body (non-stream); default 0. */
  firstTokenDelayMs?: number;
  /** Pacing between stream chunks; 0 or undefined = as fast as possible. */
  tokensPerSecond?: number;
  /** Number of content tokens/chunks in a reply; default 8. */
  chunks?: number;
  /** Default 'none'. */
  fail?: FailMode;
  /** For the *-mid-stream modes; default 2. */
  failAfterChunks?: number;
  /** For 'http-error' and 'huge-error'; default 500. */
  errorStatus?: number;
  /** For 'bad-status': the status of an otherwise well-formed answer; default 201. */
  status?: number;
  /** For 'huge-body' and 'huge-error': the body's size in bytes; default 200 MiB. */
  bodyBytes?: number;
  /** Ring buffer size of recorded requests; default 1000 (0 records nothing). */
  recordLimit?: number;
  /** The model thinks (reasoning output, as qwen3.6 does) unless asked `reasoning_effort: "none"`. */
  reasoning?: boolean;
  /** Wire shape: Ollama ≥ 0.32.6 (default), older Ollama, or vLLM. */
  flavor?: Flavor;
  /** Serves `POST /v1/responses` (default true); false answers it 404 as an Ollama before 0.13.3. */
  responses?: boolean;
  /** Serves `POST /v1/completions` (default true); false answers it 404, as a server without the route. */
  completions?: boolean;
  /** Serves `POST /v1/messages` (default true); false answers it 404, as an Ollama before 0.14. */
  messages?: boolean;
}

export interface RecordedRequest {
  seq: number;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON, or the raw string if not JSON (null until the body has been read). */
  body: unknown;
  startedAt: number;
  endedAt: number | null;
  /** The client closed the connection before the response was complete. */
  aborted: boolean;
  /** The full response was written (the HTTP response ended normally). */
  completed: boolean;
  /** Streaming only: number of content chunks (`data:` frames carrying tokens) written. */
  chunksSent: number;
}

export interface SimulatorStats {
  received: number;
  inFlight: number;
  aborted: number;
  completed: number;
}

export interface Simulator {
  /** Resolves to the base URL, e.g. "http://127.0.0.1:PORT". Default host 127.0.0.1. */
  listen(port: number, host?: string): Promise<string>;
  /** Closes the listener, destroys open sockets, clears all timers, rejects pending waitFor calls. */
  close(): Promise<void>;
  /** The ring buffer, oldest first (a copy). */
  readonly requests: RecordedRequest[];
  /** A snapshot of the counters. */
  readonly stats: SimulatorStats;
  /** Changes knobs at runtime; throws on an invalid value. In-flight requests keep their knobs. */
  configure(patch: Partial<SimulatorOptions>): void;
  /** Resolves with the first recorded request matching, now or later; rejects on timeout (default 5000 ms). */
  waitFor(predicate: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>;
  /**
   * Holds every streamed text reply after its first chunk until the returned function is called
   * (or the simulator closes): many streams open at once by construction, where a slow pace would
   * race the clock on a loaded machine. Streams started while held wait too; agent replies (tool
   * calls) and the hostile answers are not held.
   */
  hold(): () => void;
}

/** The per-request generation knobs, fully resolved. */
export interface Knobs {
  firstTokenDelayMs: number;
  tokensPerSecond: number;
  chunks: number;
  fail: FailMode;
  failAfterChunks: number;
  errorStatus: number;
  status: number;
  bodyBytes: number;
}

export const DEFAULT_KNOBS: Readonly<Knobs> = {
  firstTokenDelayMs: 0,
  tokensPerSecond: 0,
  chunks: 8,
  fail: 'none',
  failAfterChunks: 2,
  errorStatus: 500,
  status: 201,
  bodyBytes: 200 * 1024 * 1024,
};

export const DEFAULT_RECORD_LIMIT = 1000;
