import type { ObProxyError } from '../../errors.js';
import { encodeJson } from '../../wire/chat-response.js';
import { OutputBatch } from '../../wire/output-batch.js';
import { ResponsesEventLayout } from './event-layout.js';
import { type ResponsesCounts, ResponsesLayout, usageCounts } from './layouts.js';
import type { ResponsesLayouts } from './server-layouts.js';
import { type FrameSink, SseFrameReader, sseEvent } from '../../wire/sse-frame-reader.js';
import type { InvalidReason } from '../../wire/sse-relay.js';
import { redactTokenInJson } from '../../wire/upstream-token-redaction.js';

type Json = Record<string, unknown>;

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

export type { ResponsesCounts } from './layouts.js';

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
 * (apis/responses/event-layout.ts argues why that is the same bytes the slow path would send). With
 * `layouts`, the model server's, an event of a layout learned from an earlier one (its other
 * events: response.created, …, response.completed) is sent as its bytes too, our id spliced
 * into those that carry the response (apis/responses/layouts.ts argues why).
 */
export class ResponsesStreamRelay implements FrameSink {
  private readonly reader: SseFrameReader;
  /** Where the events of the read being handled go. */
  private out: OutputBatch | null = null;
  /** Our id's bytes, spliced into a learned event that carries the response. */
  private readonly idBytes: Buffer;
  done = false;
  sawError = false;
  invalid = false;
  invalidReason: InvalidReason | null = null;
  /** Output deltas seen (text, function-call arguments, reasoning): the completion when no usage comes. */
  contentChunks = 0;
  /** The last `sequence_number` sent to the client; our error event takes the next. */
  private lastSequence = -1;
  /** The terminal event's usage counts, once it came with a usage object. */
  private counted: ResponsesCounts | null = null;
  /** The layout of the last event learned, tried first; null until one is (or without the fast path). */
  private own: ResponsesEventLayout | null = null;

  constructor(
    private readonly id: string,
    private readonly maxFrameBytes = 1024 * 1024,
    private readonly upstreamToken?: string,
    private readonly fastPath = true,
    private readonly layouts: ResponsesLayouts | null = null,
  ) {
    this.reader = new SseFrameReader(maxFrameBytes);
    this.idBytes = Buffer.from(id, 'utf8');
  }

  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  /** The usage of the terminal event, where its counts are token counts. */
  counts(): ResponsesCounts {
    return this.counted ?? usageCounts(null);
  }

  /** The text to write now; for tests. */
  push(chunk: Buffer): string {
    const out = new OutputBatch();
    this.pushInto(chunk, out);
    return out.length === 0 ? '' : out.take().toString('utf8');
  }

  pushInto(chunk: Buffer, out: OutputBatch): void {
    this.out = out;
    this.reader.read(chunk, this);
  }

  /** An event of a layout learned (this stream's delta, or the server's), sent as its bytes; else -1. */
  known(buf: Buffer, start: number): number {
    const out = this.out as OutputBatch;
    const own = this.own;
    if (own !== null) {
      const e = own.end(buf, start, this.maxFrameBytes);
      if (e !== -1) {
        out.add(null, buf, start, e);
        this.lastSequence = own.sequence;
        if (own.delta) this.contentChunks++;
        return e;
      }
    }
    const layouts = this.layouts;
    if (layouts === null) return -1;
    const layout = layouts.match(buf, start, this.maxFrameBytes);
    if (layout === null) return -1;
    const e = layouts.end;
    this.lastSequence = layout.sequence(buf, this.lastSequence);
    if (layout.carries) {
      out.add(null, buf, start, layout.idStart);
      out.add(this.idBytes, buf, layout.idEnd, e);
    } else out.add(null, buf, start, e);
    if (layout.terminal) {
      this.counted = layout.counts(buf);
      this.done = true;
    } else if (layout.delta) {
      this.contentChunks++;
      if (this.fastPath)
        this.own = ResponsesEventLayout.learn(buf, start, e, layout.type, this.lastSequence) ?? this.own;
    }
    return e;
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

  refuse(reason: InvalidReason): void {
    this.invalid = true;
    this.invalidReason ??= reason;
    this.reader.clear();
  }

  /**
   * One frame: its `event:` and `data:` lines make the event (sse-frames.ts), parsed and judged.
   * An event sent as `event: <type>\ndata: <data>\n\n` may teach a layout: this stream's
   * delta layout, or the server's (apis/responses/layouts.ts).
   */
  frame(text: string, buf: Buffer, start: number, next: number): void {
    const out = this.out as OutputBatch;
    const fields = sseEvent(text);
    if (fields === null) {
      this.refuse('not_sse');
      return;
    }
    const { event, data } = fields;
    if (data === null) return;
    // A server that ends with [DONE] anyway: the terminal event came first, or this is no Responses stream.
    if (data === '[DONE]') {
      this.refuse('not_sse');
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      this.refuse('not_json');
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.refuse('not_sse');
      return;
    }
    const ev = value as Json;
    const type = typeof ev.type === 'string' ? ev.type : event;
    if (type === '' || (event !== '' && event !== type && event !== 'message')) {
      this.refuse('not_sse');
      return;
    }
    if (Number.isSafeInteger(ev.sequence_number)) this.lastSequence = ev.sequence_number as number;
    else this.lastSequence++;
    if (type === 'error') {
      this.passError(ev, data, out);
      return;
    }
    let sent = data;
    const carries = CARRIES_RESPONSE.has(type);
    const terminal = TERMINAL.has(type);
    /** It carries a response object with a string id (which a layout can splice ours into). */
    let withId = false;
    if (carries) {
      const response = ev.response;
      if (typeof response === 'object' && response !== null && !Array.isArray(response)) {
        const r = response as Json;
        withId = typeof r.id === 'string';
        if (r.id !== this.id) {
          r.id = this.id;
          const again = encodeJson(ev);
          if (again === null) {
            this.refuse('too_deep');
            return;
          }
          sent = again;
        }
        if (terminal) {
          const usage = r.usage;
          if (typeof usage === 'object' && usage !== null) this.counted = usageCounts(usage);
        }
      }
    }
    const delta = !carries && type.endsWith('.delta');
    if (delta) this.contentChunks++;
    if (sent.includes('\n') || sent.includes('\r')) {
      const one = encodeJson(ev);
      if (one === null) {
        this.refuse('too_deep');
        return;
      }
      sent = one;
    }
    const frame = Buffer.from(`event: ${type}\ndata: ${sent}\n\n`, 'utf8');
    out.add(null, frame, 0, frame.length);
    if (terminal) this.done = true;
    if (event !== type) return;
    const asCame = sent === data && !carries;
    if (asCame && !terminal && this.fastPath) {
      this.own = ResponsesEventLayout.learn(buf, start, next, type, this.lastSequence) ?? this.own;
    }
    if (this.layouts !== null && (asCame || withId)) {
      const layout = ResponsesLayout.learn(buf, start, next, { type, ev, carries: withId, terminal, delta }, this.id);
      if (layout !== null) this.layouts.add(layout);
    }
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
