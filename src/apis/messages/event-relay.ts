import type { ObProxyError } from '../../errors.js';
import { encodeJson, tokenCount } from '../../wire/chat-response.js';
import { ByteRun, viewOf } from '../../wire/byte-run.js';
import { byteLiteralEnd, digitsEnd } from '../../wire/json-bytes.js';
import { OutputBatch } from '../../wire/output-batch.js';
import { type FrameSink, SseFrameReader, sseEvent } from '../../wire/sse-frame-reader.js';
import type { InvalidReason } from '../../wire/sse-relay.js';
import { redactTokenInJson } from '../../wire/upstream-token-redaction.js';

type Json = Record<string, unknown>;

/** The Messages stream's events (Anthropic's API reference); others are not this API's stream. */
const EVENTS = new Set([
  'message_start',
  'content_block_start',
  'content_block_delta',
  'content_block_stop',
  'message_delta',
  'message_stop',
  'ping',
  'error',
]);

/**
 * A content delta as Ollama and Anthropic write it, its text or thinking the only part that
 * varies (Go writes a struct's fields in order, so the bytes are these):
 * `event: content_block_delta\ndata: {"type":"content_block_delta","index":N,"delta":{"type":
 * "text_delta","text":"…"}}\n\n`. Such a frame goes on as its bytes, unparsed: it carries no id,
 * and the slow path would send exactly these bytes (a well-formed UTF-8 literal, one data line,
 * LF endings). Any other spelling takes the slow path.
 */
const DELTA_HEAD = new ByteRun(
  Buffer.from('event: content_block_delta\ndata: {"type":"content_block_delta","index":', 'utf8'),
);
const DELTA_KINDS = [
  new ByteRun(Buffer.from(',"delta":{"type":"text_delta","text":', 'utf8')),
  new ByteRun(Buffer.from(',"delta":{"type":"thinking_delta","thinking":', 'utf8')),
  new ByteRun(Buffer.from(',"delta":{"type":"input_json_delta","partial_json":', 'utf8')),
];
const DELTA_TAIL = new ByteRun(Buffer.from('}}\n\n', 'utf8'));

/**
 * Turns the model server's Anthropic Messages event stream into what the client receives, as it
 * arrives (docs/contract.md §6): each `event: <type>` + `data: <json>` frame goes on as it came,
 * its `event:` line kept, except that the message `id` in `message_start` becomes ours. Every
 * data is parsed: an event that is not a JSON object whose `type` is one of the stream's (and
 * agrees with its `event:` line) stops the relay (`invalid`), so the client never gets a broken
 * event. `message_stop` ends it (`done`); the model server's `error` event is passed on, its
 * upstream token cleared, and ends it too (`sawError`). Usage is read from `message_start` and
 * `message_delta` (`input_tokens`, `output_tokens`; the later count wins). Nothing is added: this
 * API has no `[DONE]`. A frame of `maxFrameBytes` or more is refused.
 */
export class MessagesStreamRelay implements FrameSink {
  private readonly reader: SseFrameReader;
  /** Where the frames of the read being handled go. */
  private out: OutputBatch | null = null;
  done = false;
  sawError = false;
  invalid = false;
  invalidReason: InvalidReason | null = null;
  /** Deltas seen (text, thinking, tool input): the completion when no usage comes. */
  contentChunks = 0;
  private input: number | null = null;
  private output: number | null = null;

  constructor(
    private readonly id: string,
    private readonly maxFrameBytes = 1024 * 1024,
    private readonly upstreamToken?: string,
  ) {
    this.reader = new SseFrameReader(maxFrameBytes);
  }

  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    return { prompt: this.input, completion: this.output, reasoning: 0 };
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

  /** Our own error event, the client's last, in Anthropic's stream shape. */
  closingError(err: ObProxyError): string {
    return `event: error\ndata: ${JSON.stringify(err.toAnthropicBody())}\n\n`;
  }

  refuse(reason: InvalidReason): void {
    this.invalid = true;
    this.invalidReason ??= reason;
    this.reader.clear();
  }

  /** A content delta in its usual bytes (DELTA_HEAD), sent as they are; else -1: parsed. */
  known(buf: Buffer, start: number): number {
    const n = Math.min(buf.length, start + this.maxFrameBytes);
    const view = viewOf(buf);
    if (!DELTA_HEAD.at(view, buf, start, n)) return -1;
    const index = digitsEnd(buf, start + DELTA_HEAD.length, n);
    if (index === -1) return -1;
    let kind: ByteRun | undefined;
    for (const k of DELTA_KINDS)
      if (k.at(view, buf, index, n)) {
        kind = k;
        break;
      }
    if (kind === undefined) return -1;
    const text = byteLiteralEnd(buf, index + kind.length, n);
    if (text === -1 || !DELTA_TAIL.at(view, buf, text, n)) return -1;
    const end = text + DELTA_TAIL.length;
    (this.out as OutputBatch).add(null, buf, start, end);
    this.contentChunks++;
    return end;
  }

  /** One frame: its `event:` and `data:` lines make the event (sse-frames.ts). */
  frame(text: string): void {
    const out = this.out as OutputBatch;
    const fields = sseEvent(text);
    if (fields === null) {
      this.refuse('not_sse');
      return;
    }
    const { event, data } = fields;
    if (data === null) return;
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      this.refuse(data === '[DONE]' ? 'not_sse' : 'not_json');
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.refuse('not_sse');
      return;
    }
    const ev = value as Json;
    const type = typeof ev.type === 'string' ? ev.type : '';
    if (!EVENTS.has(type) || (event !== '' && event !== type)) {
      this.refuse('not_sse');
      return;
    }
    if (type === 'error') {
      this.passError(ev, data, out);
      return;
    }
    let sent = data;
    let again = data.includes('\n') || data.includes('\r');
    if (type === 'message_start') {
      const message = ev.message;
      if (typeof message === 'object' && message !== null && !Array.isArray(message)) {
        const m = message as Json;
        // Its output count is 0 by then: only the input is taken, the output waits for message_delta.
        this.usage(m.usage, false);
        if (m.id !== this.id) {
          m.id = this.id;
          again = true;
        }
      }
    } else if (type === 'message_delta') this.usage(ev.usage, true);
    else if (type === 'content_block_delta') this.contentChunks++;
    if (again) {
      const encoded = encodeJson(ev);
      if (encoded === null) {
        this.refuse('too_deep');
        return;
      }
      sent = encoded;
    }
    const frame = Buffer.from(`event: ${type}\ndata: ${sent}\n\n`, 'utf8');
    out.add(null, frame, 0, frame.length);
    if (type === 'message_stop') this.done = true;
  }

  /** The counts of a `usage` object, each where it is a token count; later events win. */
  private usage(u: unknown, withOutput: boolean): void {
    if (typeof u !== 'object' || u === null) return;
    const input = tokenCount((u as Json).input_tokens);
    if (input !== null) this.input = input;
    const output = withOutput ? tokenCount((u as Json).output_tokens) : null;
    if (output !== null) this.output = output;
  }

  /** The server's error event, its last, with the upstream token cleared (ours instead when it cannot be). */
  private passError(ev: Json, data: string, out: OutputBatch): void {
    this.sawError = true;
    let sent: string | null = data.includes('\n') || data.includes('\r') ? encodeJson(ev) : data;
    const token = this.upstreamToken;
    if (sent !== null && token !== undefined) sent = redactTokenInJson(sent, token);
    sent ??= JSON.stringify({
      type: 'error',
      error: {
        type: 'upstream_error',
        message: 'Model server error: an error event that could not be passed on as sent.',
      },
    });
    const frame = Buffer.from(`event: error\ndata: ${sent}\n\n`, 'utf8');
    out.add(null, frame, 0, frame.length);
  }
}
