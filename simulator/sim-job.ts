/**
 * What every generating route of the simulator is handed: the response in progress (a Job), the
 * parsed body, the server around it, and a chat request as the routes read it.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Flavor } from './sim-agent.js';
import type { Knobs, RecordedRequest } from './sim-types.js';

export interface Job {
  readonly res: ServerResponse;
  /** The request's socket (res.socket is null while a pipelined response waits its turn). */
  readonly socket: Socket;
  readonly record: RecordedRequest;
  timer: NodeJS.Timeout | null;
  /** The response has closed: generate nothing more. */
  done: boolean;
  /** The simulator cut the connection itself (not a client abort). */
  cut: boolean;
}

export type ParsedBody = { ok: true; value: unknown } | { ok: false; message: string };

export interface ChatEnv {
  hasModel(model: string): boolean;
  knobs(): Readonly<Knobs>;
  agent(): { reasoning: boolean; flavor: Flavor };
  /** A record changed (chunksSent): re-checks waitFor predicates. */
  changed(record: RecordedRequest): void;
  /** While the simulator is held (Simulator.hold), what a stream past its first chunk waits on. */
  held(): Promise<void> | null;
}

export interface SimChatRequest {
  model: string;
  body: Record<string, unknown>;
  messages: unknown[];
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | null;
}
