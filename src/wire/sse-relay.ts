import { type ObProxyError, obError } from '../errors.js';
import { encodeJson, reasoningCount, tokenCount } from './chat-response.js';
import { redactToken } from './upstream-token-redaction.js';
import { type EventLayout, EventLayouts, LayoutMatch } from './event-layouts.js';
import { OutputBatch } from './output-batch.js';
import { mayRepeatId } from './completion-splice.js';

/**
 * A usage chunk's `usage` as the model server sent it: nothing in it is checked here, so each
 * count is `unknown` until tokenCount (chat-response.ts) has made it a token count.
 */
export interface StreamUsage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
  /** Where reported (OpenAI's API): `reasoning_tokens`, part of completion_tokens. */
  completion_tokens_details?: unknown;
}

const LF = 10;
const CR = 13;
const DONE = Buffer.from('data: [DONE]\n\n');
const LFLF = Buffer.from('\n\n');

/**
 * Turns the model server's SSE bytes into what the client receives, frame by frame, as they
 * arrive: every chunk's `id` becomes ours (one per stream), the usage chunk is kept for
 * accounting and forwarded only when the client asked for it, and `[DONE]` ends the relay.
 * Bytes are split on frame boundaries only, so a multi-byte character or a frame cut across
 * TCP reads is never corrupted.
 */
export type InvalidReason = 'not_json' | 'not_sse' | 'frame_too_large' | 'too_deep';

export class SseRelay {
  private readonly layouts: EventLayouts | null;
  /** This stream's own token event (`EventLayout.forStream`), tried before the server's layouts. */
  private own: EventLayout | null = null;
  /** Where the last event matched a layout; filled in place, not made per event. */
  private readonly matched = new LayoutMatch();
  /**
   * Copies of the bytes of an unfinished frame, kept as pieces and joined once, when the frame
   * ends: joining them again on every read made a line that never ends cost quadratic time.
   */
  private pieces: Buffer[] = [];
  /** Bytes held in `pieces`: never `maxFrameBytes` or more (the frame is refused first). */
  pendingBytes = 0;
  /** A layout's head followed by our id, for the head last used (`headOf`). */
  private head: Buffer = Buffer.alloc(0);
  private headOf: Buffer | null = null;
  /** The slow path just forwarded a data event with only its id changed: its layout can be learned. */
  private learnable = false;
  done = false;
  usage: StreamUsage | null = null;
  contentChunks = 0;
  /** Events that took the slow path (decoded, checked, encoded again); for tests and profiles. */
  slowEvents = 0;
  /** The upstream sent an error event: it was forwarded, and the relay stops (one error event). */
  sawError = false;
  /** The upstream sent something that is not forwarded (see `invalidReason`), and the relay stopped. */
  invalid = false;
  invalidReason: InvalidReason | null = null;

  /**
   * `layouts` are the event layouts of this stream's model server, shared by its streams; a
   * set of its own by default (tests, tools); null forces the slow path for every event
   * (config `relayFastPath`). A frame of more than `maxFrameBytes` bytes (its blank line
   * included), finished or not, is refused. `upstreamToken`, the instance's token for its model
   * server, never leaves in an error event (upstream-token-redaction.ts).
   */
  constructor(
    private readonly id: string,
    private readonly forwardUsage: boolean,
    layouts: EventLayouts | null = new EventLayouts(),
    private readonly maxFrameBytes = 1024 * 1024,
    private readonly upstreamToken?: string,
  ) {
    this.layouts = layouts;
  }

  /** The usage chunk's counts where they are token counts (tokenCount). */
  counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    const u = this.usage;
    return {
      prompt: tokenCount(u?.prompt_tokens),
      completion: tokenCount(u?.completion_tokens),
      reasoning: reasoningCount(u) ?? 0,
    };
  }

  /** Our error event, the client's last: OpenAI's envelope as a data event, and no [DONE]. */
  closingError(err: ObProxyError): string {
    return `data: ${JSON.stringify(err.toBody())}\n\n`;
  }

  /** The relay forwards nothing more: `[DONE]`, an error event, or something refused. */
  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  /** Pieces of the unfinished frame held; for tests. */
  get pendingPieces(): number {
    return this.pieces.length;
  }

  /** The text to write to the client now (possibly empty); for tests and tools. */
  push(chunk: Buffer): string {
    const out = new OutputBatch();
    this.pushInto(chunk, out);
    return out.length === 0 ? '' : out.take().toString('utf8');
  }

  /**
   * Feeds one upstream read and adds what the client must receive to `out`, so a caller
   * gathering several reads copies the bytes once, when it writes them. Frames are found on the
   * bytes (a newline byte never occurs inside a multi-byte UTF-8 character, so nothing is
   * decoded to split them), and a frame of a known layout (EventLayout) is forwarded as our head
   * and then its own bytes from the end of its id on, without being decoded, parsed or encoded:
   * in profiles, decoding, checking and re-encoding every chunk as a string cost as much CPU as
   * the whole reference proxy spends per stream.
   */
  pushInto(chunk: Buffer, out: OutputBatch): void {
    if (this.stopped) return;
    let start = 0;
    if (this.pendingBytes > 0) {
      // Only this read is searched for the frame's end: the held bytes were searched already.
      const end = this.heldFrameEnd(chunk);
      if (end === -1) {
        this.hold(chunk, 0);
        return;
      }
      const size = this.pendingBytes + end;
      this.pieces.push(chunk.subarray(0, end));
      const frame = Buffer.concat(this.pieces, size);
      this.pieces = [];
      this.pendingBytes = 0;
      if (size > this.maxFrameBytes) {
        this.refuse('frame_too_large');
        return;
      }
      this.scan(frame, 0, out);
      if (this.stopped) return;
      start = end;
    }
    start = this.scan(chunk, start, out);
    if (start < chunk.length && !this.stopped) this.hold(chunk, start);
  }

  /**
   * Forwards the frames of `buf` from `start` on; returns where the unfinished rest begins.
   * One pass over the newlines: a read holding many frames is not searched again per frame.
   */
  private scan(buf: Buffer, start: number, out: OutputBatch): number {
    const max = this.maxFrameBytes;
    const n = buf.length;
    while (start < n) {
      // This stream's own token event first (one compare and a literal scan), then the server's layouts.
      const own = this.own;
      if (own !== null) {
        const next = own.ownEnd(buf, start);
        if (next !== -1) {
          if (next - start > max) return this.refuse('frame_too_large');
          this.contentChunks++;
          this.copy(own, own.prefix as Buffer, buf, start + own.skip, next, out);
          start = next;
          continue;
        }
      }
      const m = this.matched;
      if (this.layouts !== null && this.layouts.match(buf, start, m)) {
        const next = m.end;
        if (next - start > max) return this.refuse('frame_too_large');
        this.contentChunks++;
        const layout = m.layout as EventLayout;
        // Everything after the id is the same bytes in and out: our head, then one range.
        const prefix = this.headFor(layout.head);
        this.copy(layout, prefix, buf, m.copyFrom, next, out);
        if (m.stringStart !== -1) this.own = layout.forStream(buf, start, m, prefix);
        start = next;
        continue;
      }
      const next = frameEnd(buf, start);
      if (next === -1) return start;
      if (next - start > max) return this.refuse('frame_too_large');
      // The frame's text ends before its blank line: two LFs, or two CRLFs.
      this.frameBytes(buf, start, buf[next - 2] === CR ? next - 4 : next - 2, next, out);
      start = next;
      if (this.stopped) return n;
    }
    return start;
  }

  /** Adds `prefix`, then the event's bytes `buf[from, next)`, its blank line as LF LF. */
  private copy(layout: EventLayout, prefix: Buffer, buf: Buffer, from: number, next: number, out: OutputBatch): void {
    if (layout.crlf) {
      out.add(prefix, buf, from, next - 4);
      out.add(LFLF, buf, next, next);
    } else {
      out.add(prefix, buf, from, next);
    }
  }

  /** Keeps `buf[from…]`, an unfinished frame, as a copy (a piece must not pin its whole read). */
  private hold(buf: Buffer, from: number): void {
    const size = this.pendingBytes + buf.length - from;
    // Its blank line is still to come, so the frame will be larger than what is held.
    if (size >= this.maxFrameBytes) {
      this.refuse('frame_too_large');
      return;
    }
    this.pieces.push(Buffer.from(buf.subarray(from)));
    this.pendingBytes = size;
  }

  /**
   * Where the held frame ends in `c`, the next read: just past its blank line, or -1. A blank
   * line may straddle the two (`\n|\n`, `\r|\n\r\n`, `\r\n|\r\n`, `\r\n\r|\n`): the newlines in
   * the held bytes' last two and `c`'s first are judged with the held bytes' last three, as
   * `frameEnd` would judge them in one buffer; `c`'s later newlines lie wholly in `c`.
   */
  private heldFrameEnd(c: Buffer): number {
    for (let nl = -2; nl <= 0; nl++) {
      if (this.byteAt(c, nl) !== LF) continue;
      const after = this.byteAt(c, nl + 1);
      if (after === -1) return -1;
      if (after === LF) return nl + 2;
      if (after === CR && this.byteAt(c, nl - 1) === CR) {
        const third = this.byteAt(c, nl + 2);
        if (third === -1) return -1;
        if (third === LF) return nl + 3;
      }
    }
    return c.length > 1 ? frameEnd(c, 1) : -1;
  }

  /** Byte `i` of the held bytes followed by `c` (negative: from the held bytes' end); -1 past either end. */
  private byteAt(c: Buffer, i: number): number {
    if (i >= 0) return i < c.length ? (c[i] as number) : -1;
    for (let k = this.pieces.length - 1; k >= 0; k--) {
      const piece = this.pieces[k] as Buffer;
      if (-i <= piece.length) return piece[piece.length + i] as number;
      i += piece.length;
    }
    return -1;
  }

  private refuse(reason: InvalidReason): number {
    this.invalid = true;
    this.invalidReason ??= reason;
    this.pieces = [];
    this.pendingBytes = 0;
    return Number.MAX_SAFE_INTEGER;
  }

  /**
   * A layout's head (`data: {"id":"`) followed by our id: layouts share their head objects
   * (event-layouts.ts), so this is made once per stream, not at each change of layout.
   */
  private headFor(first: Buffer): Buffer {
    if (this.headOf !== first) {
      this.head = Buffer.concat([first, Buffer.from(this.id)]);
      this.headOf = first;
    }
    return this.head;
  }

  /**
   * Adds the frame's output to `out`: the slow path, for events of a layout not yet known. The
   * frame's text is `buf[s, e)`, its blank line `buf[e, next)`.
   */
  private frameBytes(buf: Buffer, s: number, e: number, next: number, out: OutputBatch): void {
    if (e - s === 12 && buf.compare(DONE, 0, 12, s, e) === 0) {
      this.done = true;
      out.add(null, DONE, 0, DONE.length);
      return;
    }
    this.learnable = false;
    this.slowEvents++;
    const text = this.frame(buf.toString('utf8', s, e));
    // A frame ended by CR LF LF would be forwarded with its CR, which the slow path drops.
    if (this.learnable && this.layouts !== null && buf[e - 1] !== CR) {
      const layout = this.layouts.learn(buf, s, e, next);
      if (layout !== null) this.ownFrom(layout, buf, s);
    }
    if (text === '') return;
    const b = Buffer.from(text, 'utf8');
    out.add(null, b, 0, b.length);
  }

  /**
   * Makes the event at `s`, of `layout`, this stream's own layout (when it has a token string),
   * so that its next events match without the server's shared layouts. Those are four, shared
   * by every stream of the server, and a stream whose every event has a layout of its own (one
   * asking for logprobs: the token and its logprob are in fixed bytes) replaced all four at
   * every event: every other stream of that server, finding its layout gone by its next event,
   * took the slow path for every event, at four times the CPU.
   */
  private ownFrom(layout: EventLayout, buf: Buffer, s: number): void {
    const m = this.matched;
    if (layout.match(buf, s, m) && m.stringStart !== -1) {
      this.own = layout.forStream(buf, s, m, this.headFor(layout.head));
    }
  }

  /**
   * The slow path's policy: only `data:` events reach the client, one line each, as in OpenAI's
   * wire format. Comments and the `id:` and `retry:` fields are dropped, `event: message` is an
   * ordinary event and `event: error` an error event; any other event name or line is not
   * OpenAI's stream (an HTML page, bytes that are not SSE), so the relay stops there.
   */
  private frame(frame: string): string {
    if (frame.startsWith('data:') && !frame.includes('\n')) {
      const data = frame.slice(frame.charCodeAt(5) === 32 ? 6 : 5);
      return this.data(data.endsWith('\r') ? data.slice(0, -1) : data, true);
    }
    const fields = sseFields(frame);
    if (fields === null) return this.reject('not_sse');
    if (fields.data === null) return '';
    if (fields.event === 'error') return this.namedError(fields.data);
    if (fields.event !== '' && fields.event !== 'message') return this.reject('not_sse');
    let data = fields.data;
    if (data.includes('\n')) {
      // Data lines joined: sent on one line again, or the client would get a broken event.
      const parsed = this.parse(data);
      if (parsed === null) return this.reject('not_json');
      const one = this.encode(parsed);
      if (one === null) return '';
      data = one;
    }
    return this.data(data, false);
  }

  /**
   * A data event's payload; `single`: the frame was that one line, so its layout may be learned.
   * The event is parsed and judged by what it holds, never by how its text looks: a server may
   * write `"usage": {` with a space (Python's json.dumps) or a key with escapes, and a usage
   * chunk told by its text was then forwarded to clients that had not asked for it, uncounted.
   */
  private data(data: string, single: boolean): string {
    if (data === '[DONE]') {
      this.done = true;
      return 'data: [DONE]\n\n';
    }
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      // A broken event would make the client's SDK throw a parse error.
      return this.reject('not_json');
    }
    // A chunk is an object; a bare string or number is not OpenAI's stream.
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return this.reject('not_sse');
    const event = value as Record<string, unknown>;
    // What the client's SDK takes for an error (openai-node: `if (data.error)`): the stream's last event.
    if (isError(event.error)) return this.errorEvent(event);
    const usage = event.usage;
    if (typeof usage === 'object' && usage !== null) {
      this.usage = usage as StreamUsage;
      const choices = event.choices;
      const usageOnly = Array.isArray(choices) && choices.length === 0;
      if (!usageOnly) this.contentChunks++;
      if (this.forwardUsage) return this.withOurId(data, spliceable(data), event);
      if (usageOnly) return '';
      delete event.usage;
      event.id = this.id;
      const rest = this.encode(event);
      return rest === null ? '' : `data: ${rest}\n\n`;
    }
    this.contentChunks++;
    const idLen = spliceable(data);
    // Only an event sent as its own bytes with our id spliced in is a layout the fast path may copy.
    this.learnable = single && idLen !== -1;
    return this.withOurId(data, idLen, event);
  }

  /**
   * `event: error`: one error event, the server's when its data holds an `error`, otherwise ours
   * with the server's message and string code (as for an error status, upstream-errors.ts).
   */
  private namedError(data: string): string {
    const parsed = this.parse(data);
    if (parsed === null) return this.reject('not_json');
    if (isError(parsed.error)) return this.errorEvent(parsed);
    const { message, code } = parsed;
    return this.ourErrorEvent(
      typeof message === 'string' && message !== '' ? message : 'an error event without a message',
      typeof code === 'string' && code !== '' ? code : 'upstream_error',
    );
  }

  /**
   * An upstream error event, the client's last, as our error event: the server's message and its
   * code when that is a string (else `upstream_error`), in the one error shape every answer of
   * ours has. llama-server's `{"error":{"code":500,…}}` would otherwise reach the client with a
   * number where the OpenAI shape has a string, and a server's other fields (its upstream token
   * among them) never reach it.
   */
  private errorEvent(event: Record<string, unknown>): string {
    const error = event.error;
    let message: unknown = error;
    let code: unknown;
    if (typeof error === 'object' && error !== null) {
      message = (error as Record<string, unknown>).message;
      code = (error as Record<string, unknown>).code;
    }
    return this.ourErrorEvent(
      typeof message === 'string' && message !== '' ? message : 'an error event without a message',
      typeof code === 'string' && code !== '' ? code : 'upstream_error',
    );
  }

  /** Our error event with the server's message (its upstream token cleared) and string code. */
  private ourErrorEvent(message: string, code: string): string {
    this.sawError = true;
    const token = this.upstreamToken;
    const err = obError('upstream_error', {
      message: `Model server error: ${redactToken(message, token)}`,
      wireCode: redactToken(code, token),
    });
    return `data: ${JSON.stringify(err.toBody())}\n\n`;
  }

  private reject(reason: InvalidReason): string {
    this.refuse(reason);
    return '';
  }

  private parse(data: string): Record<string, unknown> | null {
    try {
      const v: unknown = JSON.parse(data);
      return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }

  /** The event with our id: spliced in when `idLen` (`spliceable`) allows, else `event` encoded again. */
  private withOurId(data: string, idLen: number, event: Record<string, unknown>): string {
    if (idLen !== -1) return `data: {"id":"${this.id}${data.slice(7 + idLen)}\n\n`;
    event.id = this.id;
    const text = this.encode(event);
    return text === null ? '' : `data: ${text}\n\n`;
  }

  /**
   * `v` encoded again, or null (and the relay stops) where it nests too deeply for the encoder:
   * JSON.parse takes any depth, JSON.stringify overflows the stack at a few thousand levels. Its
   * RangeError, thrown inside undici's callback, ended the stream as `upstream_unavailable`, as
   * if the model server could not be reached (and an error event, already marked seen, left the
   * client's stream open).
   */
  private encode(v: unknown): string | null {
    const text = encodeJson(v);
    if (text === null) this.refuse('too_deep');
    return text;
  }
}

/**
 * From `from`, the index just past the first blank line (two LFs or two CRLFs), or -1 when
 * there is none yet: the newlines are judged in order, each by the bytes around it.
 */
export function frameEnd(buf: Buffer, from: number): number {
  const n = buf.length;
  for (;;) {
    const nl = buf.indexOf(LF, from);
    if (nl === -1 || nl + 1 >= n) return -1;
    if (buf[nl + 1] === LF) return nl + 2;
    if (nl > 0 && buf[nl - 1] === CR && buf[nl + 1] === CR) {
      if (nl + 2 >= n) return -1;
      if (buf[nl + 2] === LF) return nl + 3;
    }
    from = nl + 1;
  }
}

/**
 * The length of the id's text when our id can be spliced into `data`: the id is its first key
 * (every server we face), has no escapes, and is its only `id`; else -1. Not when `data` holds a
 * raw CR, which JSON allows only as whitespace: SSE clients end a line there and would get half
 * an event, so the event is encoded again, without it.
 */
function spliceable(data: string): number {
  if (!data.startsWith('{"id":"') || data.includes('\r')) return -1;
  const end = data.indexOf('"', 7);
  if (end === -1 || data.lastIndexOf('\\', end) >= 7) return -1;
  return mayRepeatId(data, end) && !splicedIdWins(data.slice(end)) ? -1 : end - 7;
}

/**
 * Whether an id spliced before `rest` (the event's text after its first id) is the id its parse
 * gives. Most events that `mayRepeatId` flags hold a tool call's id, nested, which is no
 * repeat: those are spliced still (their bytes as sent), the rare true repeat is encoded again.
 */
function splicedIdWins(rest: string): boolean {
  try {
    return (JSON.parse(`{"id":"x${rest}`) as { id?: unknown }).id === 'x';
  } catch {
    return false;
  }
}

/** An `error` member the client's SDK throws on: any truthy value. */
function isError(error: unknown): boolean {
  return error !== undefined && error !== null && error !== false && error !== 0 && error !== '';
}

/** The fields of a frame that is not a single `data:` line, or null when a line is not SSE. */
function sseFields(frame: string): { data: string | null; event: string } | null {
  let data: string | null = null;
  let event = '';
  for (const raw of frame.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    // Blank, or a comment (a heartbeat).
    if (line === '' || line.charCodeAt(0) === 58) continue;
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (name === 'data') data = data === null ? value : `${data}\n${value}`;
    else if (name === 'event') event = value;
    else if (name !== 'id' && name !== 'retry') return null;
  }
  return { data, event };
}
