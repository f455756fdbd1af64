import type { ObProxyError } from '../errors.js';
import { encodeJson, tokenCount } from './chat-response.js';
import { OutputBatch } from './output-batch.js';
import { ResponsesEventLayout } from './responses-event-layout.js';
import type { InvalidReason } from './sse-relay.js';
import { frameEnd } from './sse-relay.js';
import { redactTokenInJson } from './upstream-token-redaction.js';

type Json = Record<string, unknown>;

const CR = 13;

/** Events whose data carries the response object, and with it the response id. */
const CARRIES_RESPONSE = new Set([
  'response.created',
  'response.in_progress',
  'response.queued',
  'response.completed',
  'response.failed',
  'response.incomplete',
]);
/** The response is over: no event follows (Ollama ends its body here; it sends no `[DONE]`). */
const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete']);

/** The stream of a Responses API answer, relayed event for event (docs/contract.md §6). */
export interface ResponsesCounts {
  prompt: number | null;
  completion: number | null;
  reasoning: number;
}

/**
 * Turns the model server's Responses event stream into what the client receives, as it arrives:
 * each `event: <type>` + `data: <json>` frame goes on as it came, except that the response
 * object's `id` (in `response.created`, `response.in_progress`, `response.completed` and the
 * like) becomes ours. Every data is parsed: an event that is not a JSON object with a `type`
 * stops the relay (`invalid`), so the client never gets a broken event. The terminal event
 * (`response.completed`, `.failed`, `.incomplete`) ends it (`done`), and its usage is kept for
 * accounting; an `error` event is passed on (the upstream token cleared) and ends it too
 * (`sawError`). Nothing is added: no `[DONE]`, which this API does not have. A frame of
 * `maxFrameBytes` or more is refused.
 *
 * With `fastPath`, an event with the layout of the last event of its kind that went the slow way
 * (in practice every delta after a stream's first) is sent as its bytes, unparsed
 * (responses-event-layout.ts argues why that is the same bytes the slow path would send).
 */
export class ResponsesStreamRelay {
  private pieces: Buffer[] = [];
  private pendingBytes = 0;
  done = false;
  sawError = false;
  invalid = false;
  invalidReason: InvalidReason | null = null;
  /** Output deltas seen (text, function-call arguments, reasoning): the completion when no usage comes. */
  contentChunks = 0;
  /** The last `sequence_number` sent to the client; our error event takes the next. */
  private lastSequence = -1;
  private usage: Json | null = null;
  /** The layout of the last event learned, tried first; null until one is (or without the fast path). */
  private own: ResponsesEventLayout | null = null;

  constructor(
    private readonly id: string,
    private readonly maxFrameBytes = 1024 * 1024,
    private readonly upstreamToken?: string,
    private readonly fastPath = true,
  ) {}

  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  /** The usage of the terminal event, where its counts are token counts. */
  counts(): ResponsesCounts {
    const u = this.usage;
    const details = u?.output_tokens_details;
    const reasoning =
      typeof details === 'object' && details !== null ? tokenCount((details as Json).reasoning_tokens) : null;
    return { prompt: tokenCount(u?.input_tokens), completion: tokenCount(u?.output_tokens), reasoning: reasoning ?? 0 };
  }

  /** The text to write now; for tests. */
  push(chunk: Buffer): string {
    const out = new OutputBatch();
    this.pushInto(chunk, out);
    return out.length === 0 ? '' : out.take().toString('utf8');
  }

  pushInto(chunk: Buffer, out: OutputBatch): void {
    if (this.stopped) return;
    let buf = chunk;
    if (this.pendingBytes > 0) {
      this.pieces.push(chunk);
      buf = Buffer.concat(this.pieces, this.pendingBytes + chunk.length);
      this.pieces = [];
      this.pendingBytes = 0;
    }
    let start = 0;
    while (start < buf.length && !this.stopped) {
      const own = this.own;
      if (own !== null) {
        const e = own.end(buf, start, this.maxFrameBytes);
        if (e !== -1) {
          out.add(null, buf, start, e);
          this.lastSequence = own.sequence;
          if (own.delta) this.contentChunks++;
          start = e;
          continue;
        }
      }
      const next = frameEnd(buf, start);
      if (next === -1) break;
      if (next - start > this.maxFrameBytes) {
        this.refuse('frame_too_large');
        return;
      }
      const end = buf[next - 2] === CR ? next - 4 : next - 2;
      const learnable = this.frame(buf.toString('utf8', start, end), out);
      if (learnable !== null && this.fastPath) {
        this.own = ResponsesEventLayout.learn(buf, start, end, next, learnable, this.lastSequence) ?? this.own;
      }
      start = next;
    }
    if (this.stopped || start >= buf.length) return;
    const rest = buf.length - start;
    if (rest >= this.maxFrameBytes) {
      this.refuse('frame_too_large');
      return;
    }
    // A copy: a piece must not pin its whole read. Joined once its frame ends.
    this.pieces.push(Buffer.from(buf.subarray(start)));
    this.pendingBytes = rest;
  }

  /** Our own error event, the client's last: the Responses stream's shape, the next sequence number. */
  closingError(err: ObProxyError): string {
    const data = JSON.stringify({
      type: 'error',
      code: err.wireCode,
      message: err.message,
      param: null,
      sequence_number: this.lastSequence + 1,
    });
    return `event: error\ndata: ${data}\n\n`;
  }

  private refuse(reason: InvalidReason): void {
    this.invalid = true;
    this.invalidReason ??= reason;
    this.pieces = [];
    this.pendingBytes = 0;
  }

  /**
   * One frame: comments and blank lines are dropped; `event:` and `data:` lines make the event.
   * Returns its type when it was sent as `event: <type>\ndata: <data>\n\n` with its data as it
   * came, carries no response object and is no error (its layout may be learned); else null.
   */
  private frame(text: string, out: OutputBatch): string | null {
    let event = '';
    let data: string | null = null;
    for (const raw of text.split('\n')) {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      if (line === '' || line.charCodeAt(0) === 58) continue;
      const colon = line.indexOf(':');
      const name = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
      if (name === 'data') data = data === null ? value : `${data}\n${value}`;
      else if (name === 'event') event = value;
      else if (name !== 'id' && name !== 'retry') {
        this.refuse('not_sse');
        return null;
      }
    }
    if (data === null) return null;
    // A server that ends with [DONE] anyway: the terminal event came first, or this is no Responses stream.
    if (data === '[DONE]') {
      this.refuse('not_sse');
      return null;
    }
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      this.refuse('not_json');
      return null;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.refuse('not_sse');
      return null;
    }
    const ev = value as Json;
    const type = typeof ev.type === 'string' ? ev.type : event;
    if (type === '' || (event !== '' && event !== type && event !== 'message')) {
      this.refuse('not_sse');
      return null;
    }
    if (Number.isSafeInteger(ev.sequence_number)) this.lastSequence = ev.sequence_number as number;
    else this.lastSequence++;
    if (type === 'error') {
      this.passError(ev, data, out);
      return null;
    }
    let sent = data;
    if (CARRIES_RESPONSE.has(type)) {
      const response = ev.response;
      if (typeof response === 'object' && response !== null && !Array.isArray(response)) {
        const r = response as Json;
        if (r.id !== this.id) {
          r.id = this.id;
          const again = encodeJson(ev);
          if (again === null) {
            this.refuse('too_deep');
            return null;
          }
          sent = again;
        }
        if (TERMINAL.has(type)) {
          const usage = r.usage;
          if (typeof usage === 'object' && usage !== null) this.usage = usage as Json;
        }
      }
    } else if (type.endsWith('.delta')) this.contentChunks++;
    if (sent.includes('\n') || sent.includes('\r')) {
      const one = encodeJson(ev);
      if (one === null) {
        this.refuse('too_deep');
        return null;
      }
      sent = one;
    }
    const frame = Buffer.from(`event: ${type}\ndata: ${sent}\n\n`, 'utf8');
    out.add(null, frame, 0, frame.length);
    if (TERMINAL.has(type)) {
      this.done = true;
      return null;
    }
    return sent === data && event === type && !CARRIES_RESPONSE.has(type) ? type : null;
  }

  /** The server's error event, its last, with the upstream token cleared (ours instead when it cannot be). */
  private passError(ev: Json, data: string, out: OutputBatch): void {
    this.sawError = true;
    let sent: string | null = data.includes('\n') || data.includes('\r') ? encodeJson(ev) : data;
    const token = this.upstreamToken;
    if (sent !== null && token !== undefined) sent = redactTokenInJson(sent, token);
    if (sent === null)
      sent = JSON.stringify({
        type: 'error',
        code: 'upstream_error',
        message: 'Model server error: an error event that could not be passed on as sent.',
        param: null,
        sequence_number: this.lastSequence,
      });
    const frame = Buffer.from(`event: error\ndata: ${sent}\n\n`, 'utf8');
    out.add(null, frame, 0, frame.length);
  }
}
