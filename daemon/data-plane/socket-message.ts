import { type Turn, responseOf, turnOf } from '../../src/apis/responses/socket-create.js';
import type { ObProxyError } from '../../src/errors.js';
import { requestId } from '../../src/ids.js';
import type { KeyCheckDeps } from '../context.js';
import type { HeldSlot } from './close-watch.js';
import { writeRawError } from './send-error.js';
import { type MessageSink, SocketResponse } from './socket-response.js';
import type { SocketWaiter, WaitingMessage } from './socket-waiter.js';

/** The events that carry the response object, whose `previous_response_id` is the request's. */
const LIFECYCLE = new Set([
  'response.created',
  'response.in_progress',
  'response.completed',
  'response.incomplete',
  'response.failed',
  'response.queued',
]);

/**
 * One `response.create` of a Responses socket, from the turn it is read until its answer is
 * over: the answer (socket-response.ts), what it holds of the key's limits and memory, and what
 * the socket learns from its events, read as they go by (`watch`): the turn to keep, a failure,
 * and the chain its response continues, which the model server cannot know.
 */
export class SocketMessage implements WaitingMessage {
  readonly reqId = requestId();
  readonly startedAt = performance.now();
  readonly res: SocketResponse;
  previous: string | null = null;
  /** The input sent upstream, in full: with the output, the socket's next turn. */
  input: unknown = undefined;
  /** Bytes of the key's body memory held for it, and tokens of its tpm reserved. */
  held = 0;
  reserved = 0;
  /** Sent upstream: its exchange tells the access line and the usage. */
  sent = false;
  refusedCode: string | null = null;
  turn: Turn | null = null;
  failed = false;
  /** The code of its answer's error event, if it had one. */
  errorCode: string | null = null;
  waiter: SocketWaiter | null = null;
  /** Sends it upstream once its instance's queue grants it a slot. */
  go: (() => void) | null = null;

  constructor(sink: MessageSink) {
    this.res = new SocketResponse(sink, (name, data) => this.watch(name, data));
  }

  refuse(err: ObProxyError): void {
    this.refusedCode = err.wireCode;
    writeRawError(this.res.asResponse, err, this.reqId);
  }

  granted(): void {
    this.go?.();
  }

  private watch(name: string, data: string): string {
    if (name === 'error') {
      this.failed = true;
      this.errorCode = codeOf(data);
      return data;
    }
    if (!LIFECYCLE.has(name)) return data;
    let event: unknown;
    try {
      event = JSON.parse(data);
    } catch {
      return data;
    }
    const response = responseOf(event);
    if (response === null) return data;
    if (name === 'response.failed') this.failed = true;
    else if ((name === 'response.completed' || name === 'response.incomplete') && typeof response.id === 'string')
      this.turn = turnOf(response.id, this.input, response, this.held + data.length);
    if (this.previous === null || !('previous_response_id' in response)) return data;
    response.previous_response_id = this.previous;
    return JSON.stringify(event);
  }
}

/** An error event's code: a stream's own (`code`), or an answer's with a status (`error.code`). */
function codeOf(data: string): string | null {
  try {
    const e = JSON.parse(data) as { code?: unknown; error?: { code?: unknown } };
    const code = e.code ?? e.error?.code;
    return typeof code === 'string' ? code : null;
  } catch {
    return null;
  }
}

/** A key's concurrency place, taken by one message: given back once, when its answer is over. */
export class SocketSlot implements HeldSlot {
  private held = true;

  constructor(
    private readonly ctx: Pick<KeyCheckDeps, 'keyLimits'>,
    private readonly key: string,
  ) {}

  clientClosed(): void {
    this.release();
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.ctx.keyLimits.leave(this.key);
  }
}
