import { JsonFrameCheck } from './frame-check.js';
import { FrameShapes, byteLiteralEnd } from './frame-shapes.js';
import { OutputBatch } from './output-batch.js';

export interface StreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

/** This stream's own content event: its bytes around the content string, in and out. */
interface Template {
  inPrefix: Buffer;
  inSuffix: Buffer;
  outPrefix: Buffer;
}

const LF = 10;
const CR = 13;
const DONE = Buffer.from('data: [DONE]\n\n');

/**
 * Turns the model server's SSE bytes into what the client receives, frame by frame, as they
 * arrive: every chunk's `id` becomes ours (one per stream), the usage chunk is kept for
 * accounting and forwarded only when the client asked for it, and `[DONE]` ends the relay.
 * Bytes are split on frame boundaries only, so a multi-byte character or a frame cut across
 * TCP reads is never corrupted.
 */
export class SseRelay {
  private readonly check = new JsonFrameCheck();
  /** Bytes of an incomplete frame, kept for the next read. */
  private pending: Buffer | null = null;
  /** How far `pending` has been searched for a frame end without finding one. */
  private scanned = 0;
  /** Our id after a layout's first run, for the layout last matched (`headOf`). */
  private head: Buffer = Buffer.alloc(0);
  private headOf: Buffer | null = null;
  /** The slow path just forwarded a data event with only its id changed: its layout can be learned. */
  private learnable = false;
  private template: Template | null = null;
  done = false;
  usage: StreamUsage | null = null;
  contentChunks = 0;
  /** Events that took the slow path (decoded, checked, encoded again); for tests and profiles. */
  slowEvents = 0;
  /** The upstream sent an error event inside the stream. */
  sawError = false;
  /** The upstream sent a data event that is not JSON: it is not forwarded, and the relay stops. */
  invalid = false;

  /**
   * `shapes` are the event layouts of this stream's model server, shared by its streams; a
   * relay of its own by default (tests, tools).
   */
  constructor(private readonly id: string, private readonly forwardUsage: boolean, private readonly shapes = new FrameShapes()) {}

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
   * decoded to split them), and a frame of a known layout (FrameShapes) is forwarded as our head
   * and then its own bytes from the end of its id on, without being decoded, parsed or encoded:
   * in profiles, decoding, checking and re-encoding every chunk as a string cost as much CPU as
   * the whole reference proxy spends per stream.
   */
  pushInto(chunk: Buffer, out: OutputBatch): void {
    const buf = this.pending === null ? chunk : Buffer.concat([this.pending, chunk]);
    let start = 0;
    let from = this.scanned;
    // One pass over the newlines: a read holding many frames is not searched again per frame.
    for (;;) {
      if (from === start) {
        // This stream's own content event first (one compare), then the server's layouts.
        let next = this.template === null ? -1 : this.templateFrame(buf, start);
        if (next !== -1) {
          const t = this.template as Template;
          this.contentChunks++;
          out.add(t.outPrefix, buf, start + t.inPrefix.length, next);
          start = next;
          from = next;
          // A model server sends one event per HTTP chunk: usually nothing is left to search.
          if (next === buf.length) break;
          continue;
        }
        const shapes = this.shapes;
        next = shapes.match(buf, start);
        if (next !== -1) {
          this.contentChunks++;
          // Everything after the id is the same bytes in and out: our head, then one range.
          const head = this.headFor(shapes.head);
          out.add(head, buf, shapes.idEnd, next);
          if (shapes.litStart !== -1) this.template = {
            inPrefix: Buffer.from(buf.subarray(start, shapes.litStart)),
            inSuffix: Buffer.from(buf.subarray(shapes.litEnd, next - 2)),
            outPrefix: Buffer.concat([head, buf.subarray(shapes.idEnd, shapes.litStart)]),
          };
          start = next;
          from = next;
          if (next === buf.length) break;
          continue;
        }
      }
      const nl = buf.indexOf(LF, from);
      if (nl === -1 || nl + 1 >= buf.length) {
        from = nl === -1 ? buf.length : nl;
        break;
      }
      let at = -1;
      let next = 0;
      if (buf[nl + 1] === LF) {
        at = nl;
        next = nl + 2;
      } else if (nl > 0 && buf[nl - 1] === CR && buf[nl + 1] === CR) {
        if (nl + 2 >= buf.length) {
          from = nl;
          break;
        }
        if (buf[nl + 2] === LF) {
          at = nl - 1;
          next = nl + 3;
        }
      }
      if (at === -1) {
        from = nl + 1;
        continue;
      }
      this.frameBytes(buf, start, at, out);
      start = next;
      from = next;
      if (this.done || this.invalid) break;
    }
    if (start >= buf.length || this.done || this.invalid) {
      this.pending = null;
      this.scanned = 0;
    } else {
      // A copy, so a partial frame does not pin the whole read buffer it came in.
      this.pending = start === 0 && buf !== chunk ? buf : Buffer.from(buf.subarray(start));
      this.scanned = Math.max(0, from - start);
    }
  }

  /**
   * When the event at `s` is this stream's content event with another well-formed content
   * string, followed by a blank line, returns the index just past that line; otherwise -1.
   * (Its prefix and suffix came from one event, so that blank line is where the event ends.)
   */
  private templateFrame(buf: Buffer, s: number): number {
    const t = this.template as Template;
    const pl = t.inPrefix.length;
    const n = buf.length;
    if (s + pl >= n || buf.compare(t.inPrefix, 0, pl, s, s + pl) !== 0) return -1;
    const litEnd = byteLiteralEnd(buf, s + pl, n);
    if (litEnd === -1) return -1;
    const suffix = t.inSuffix;
    const sl = suffix.length;
    if (litEnd + sl + 2 > n) return -1;
    for (let i = 0; i < sl; i++) if (buf[litEnd + i] !== suffix[i]) return -1;
    const e = litEnd + sl;
    return buf[e] === LF && buf[e + 1] === LF ? e + 2 : -1;
  }

  /** A layout's first run (`data: {"id":"`) followed by our id, made once per stream and layout. */
  private headFor(first: Buffer): Buffer {
    if (this.headOf !== first) {
      this.head = Buffer.concat([first, Buffer.from(this.id)]);
      this.headOf = first;
    }
    return this.head;
  }

  /** Adds the frame's output to `out`: the slow path, for events of a layout not yet known. */
  private frameBytes(buf: Buffer, s: number, e: number, out: OutputBatch): void {
    if (e - s === 12 && buf.compare(DONE, 0, 12, s, e) === 0) {
      this.done = true;
      out.add(null, DONE, 0, DONE.length);
      return;
    }
    this.learnable = false;
    this.slowEvents++;
    const text = this.frame(buf.toString('utf8', s, e));
    // Layouts end in a blank line of two LFs; an event ended by CRLFs would never match its own.
    if (this.learnable && buf[e] === LF && buf[e + 1] === LF) this.shapes.learn(buf, s, e);
    if (text === '') return;
    const b = Buffer.from(text, 'utf8');
    out.add(null, b, 0, b.length);
  }

  private frame(frame: string): string {
    if (!frame.startsWith('data:')) return frame.trim() === '' ? '' : `${frame}\n\n`;
    const data = frame.slice(frame.charCodeAt(5) === 32 ? 6 : 5);
    if (data === '[DONE]') {
      this.done = true;
      return 'data: [DONE]\n\n';
    }
    if (data.startsWith('{"error"') || data.startsWith('{ "error"')) {
      this.sawError = true;
      return `data: ${data}\n\n`;
    }
    if (data.includes('"usage":{')) {
      const parsed = this.parse(data);
      if (parsed === null) return this.reject();
      const usage = parsed.usage as StreamUsage | undefined;
      if (usage !== undefined) this.usage = usage;
      const choices = parsed.choices;
      if (Array.isArray(choices) && choices.length === 0) {
        if (!this.forwardUsage) return '';
        parsed.id = this.id;
        return `data: ${JSON.stringify(parsed)}\n\n`;
      }
      if (!this.forwardUsage) delete parsed.usage;
      parsed.id = this.id;
      this.contentChunks++;
      return `data: ${JSON.stringify(parsed)}\n\n`;
    }
    // A broken event would make the client's SDK throw a parse error: check before forwarding.
    if (!this.check.isValid(data)) return this.reject();
    this.contentChunks++;
    this.learnable = true;
    return `data: ${this.rewriteId(data)}\n\n`;
  }

  private reject(): string {
    this.invalid = true;
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

  /**
   * Replaces the event's id: spliced when it is the first key and has no escapes (every server
   * we face), otherwise through a parse.
   */
  private rewriteId(data: string): string {
    if (data.startsWith('{"id":"')) {
      const end = data.indexOf('"', 7);
      if (end !== -1 && data.lastIndexOf('\\', end) < 7) return `{"id":"${this.id}${data.slice(end)}`;
    }
    const parsed = this.parse(data);
    if (parsed === null) return data;
    parsed.id = this.id;
    return JSON.stringify(parsed);
  }
}
