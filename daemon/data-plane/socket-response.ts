import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';

/** Where a socket's messages go (the WebSocket of a Responses socket). */
export interface MessageSink {
  /** Sends one text message; `sent` is called once it has left for the client. */
  send(text: string, sent: () => void): void;
  /** Bytes sent and not yet written to the client's connection. */
  readonly buffered: number;
}

/**
 * What the socket reads of the events it relays: `data` is the event's JSON as the relay wrote
 * it, `name` its `event:` line. Returns the JSON to send (the same, or rewritten).
 */
export type EventWatch = (name: string, data: string) => string;

/** Past this, a write says "wait": the relay pauses the model server until the client reads. */
const HIGH_WATER = 64 * 1024;

/**
 * One exchange's answer as the relays write it (the part of a ServerResponse they use: writeHead,
 * write, end, 'close' and 'drain'), sent as WebSocket text messages. A 200 is an event stream:
 * each event's data becomes one message (the Responses events carry their own `type`). Any other
 * status is an error answered whole (a refusal, the model server's error, a revocation before the
 * answer began), sent as the WebSocket mode's error event, `{"type":"error","status":<status>,
 * "error":{…}}`. So the relays, the key's checks, limits and accounting serve a socket's messages
 * as they serve HTTP requests, without a line of theirs knowing it.
 *
 * One per exchange; 'close' comes once, after the answer is written whole or the client left
 * (`destroy`), as a ServerResponse's does.
 */
export class SocketResponse extends EventEmitter {
  statusCode = 200;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  destroyed = false;
  /** A message's body is in whole before its exchange begins (unread-body.ts reads this). */
  readonly req = { complete: true, headers: {} };
  /** An event stream's unfinished frame, or an error answer's body so far. */
  private partial = '';
  private waiting = false;
  private closed = false;

  constructor(
    private readonly sink: MessageSink,
    private readonly watch: EventWatch,
  ) {
    super();
  }

  /** As the relays know it: they were written for Node's responses, and use only what is above. */
  get asResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }

  writeHead(status: number): this {
    this.statusCode = status;
    this.headersSent = true;
    return this;
  }

  flushHeaders(): void {}

  write(chunk: Buffer | string): boolean {
    if (this.writableEnded || this.destroyed) return false;
    this.take(typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
    if (this.sink.buffered <= HIGH_WATER) return true;
    this.waiting = true;
    return false;
  }

  end(chunk?: Buffer | string): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    if (!this.destroyed) {
      if (chunk !== undefined) this.take(typeof chunk === 'string' ? chunk : chunk.toString('utf8'));
      if (this.statusCode !== 200) this.sendError();
      this.writableFinished = true;
    }
    this.closeSoon();
    return this;
  }

  /** The client left (the socket closed) before the answer was written whole. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.closeSoon();
  }

  private closeSoon(): void {
    if (this.closed) return;
    this.closed = true;
    // After the caller's turn, as Node emits it: a relay ending the answer finishes its own work first.
    process.nextTick(() => this.emit('close'));
  }

  private take(text: string): void {
    if (this.statusCode !== 200) {
      this.partial += text;
      return;
    }
    let buf = this.partial === '' ? text : this.partial + text;
    let end = buf.indexOf('\n\n');
    while (end !== -1) {
      this.event(buf.slice(0, end));
      buf = buf.slice(end + 2);
      end = buf.indexOf('\n\n');
    }
    this.partial = buf;
  }

  /** One SSE frame as the relays write them: an `event:` line and `data:` lines. */
  private event(frame: string): void {
    let name = '';
    let data: string | null = null;
    for (const line of frame.split('\n')) {
      if (line.startsWith('data:')) {
        const d = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
        data = data === null ? d : `${data}\n${d}`;
      } else if (line.startsWith('event:')) name = line.slice(line.charCodeAt(6) === 32 ? 7 : 6);
    }
    if (data !== null) this.send(this.watch(name, data));
  }

  private sendError(): void {
    let body: unknown;
    try {
      body = JSON.parse(this.partial);
    } catch {
      body = null;
    }
    const error =
      typeof body === 'object' && body !== null && !Array.isArray(body) && 'error' in body
        ? (body as { error: unknown }).error
        : { message: this.partial, type: 'api_error', code: null, param: null };
    this.partial = '';
    this.send(this.watch('error', JSON.stringify({ type: 'error', status: this.statusCode, error })));
  }

  private send(text: string): void {
    this.sink.send(text, this.sent);
  }

  private readonly sent = (): void => {
    if (this.waiting && this.sink.buffered <= HIGH_WATER / 2) {
      this.waiting = false;
      this.emit('drain');
    }
  };
}
