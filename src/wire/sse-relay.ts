import { JsonFrameCheck, stringLiteralEnd } from './frame-check.js';
import { OutputBatch } from './output-batch.js';

export interface StreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

/** A learned content frame: its bytes around the content string, in and out. */
interface Template {
  inPrefix: Buffer;
  inSuffix: Buffer;
  outPrefix: Buffer;
}

const LF = 10;
const CR = 13;

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
  private template: Template | null = null;
  done = false;
  usage: StreamUsage | null = null;
  contentChunks = 0;
  /** The upstream sent an error event inside the stream. */
  sawError = false;
  /** The upstream sent a data event that is not JSON: it is not forwarded, and the relay stops. */
  invalid = false;

  constructor(private readonly id: string, private readonly forwardUsage: boolean) {}

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
   * decoded to split them), and a frame that matches the learned template is forwarded as our
   * prefix and then its own bytes from the content string on, without being decoded, parsed or
   * encoded: in profiles, decoding, checking and re-encoding every chunk as a string cost as
   * much CPU as the whole reference proxy spends per stream.
   */
  pushInto(chunk: Buffer, out: OutputBatch): void {
    const buf = this.pending === null ? chunk : Buffer.concat([this.pending, chunk]);
    let start = 0;
    let from = this.scanned;
    // One pass over the newlines: a read holding many frames is not searched again per frame.
    for (;;) {
      if (this.template !== null && from === start) {
        const next = this.templateFrame(buf, start);
        if (next !== -1) {
          const t = this.template;
          this.contentChunks++;
          // Content, suffix and blank line are the same bytes in and out: one range after the prefix.
          out.add(t.outPrefix, buf, start + t.inPrefix.length, next);
          start = next;
          from = next;
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
   * When the frame at `s` is the learned template with another well-formed content string,
   * followed by a blank line, returns the index just past that line; otherwise -1. Found from
   * the frame's start, without searching for its end: the prefix and suffix hold no blank line
   * (they were learned from one frame) and a string literal holds no control character, so
   * the first blank line is where this frame ends.
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

  /** Adds the frame's output to `out`. */
  private frameBytes(buf: Buffer, s: number, e: number, out: OutputBatch): void {
    const text = this.frame(buf.toString('utf8', s, e));
    if (text === '') return;
    const b = Buffer.from(text, 'utf8');
    out.add(null, b, 0, b.length);
  }

  /**
   * After a plain content frame was checked and rewritten on the slow path: remember its bytes
   * before and after the content string literal, when the rewrite touched only the part before.
   */
  private learn(frame: string, rewritten: string): void {
    const key = frame.lastIndexOf('"content":"');
    if (key === -1) return;
    const litStart = key + 10;
    const litEnd = stringLiteralEnd(frame, litStart);
    if (litEnd === -1) return;
    const tail = `${frame.slice(litStart)}\n\n`;
    if (!rewritten.endsWith(tail)) return;
    this.template = {
      inPrefix: Buffer.from(frame.slice(0, litStart)),
      inSuffix: Buffer.from(frame.slice(litEnd)),
      outPrefix: Buffer.from(rewritten.slice(0, rewritten.length - tail.length)),
    };
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
    const rewritten = `data: ${this.rewriteId(data)}\n\n`;
    this.learn(frame, rewritten);
    return rewritten;
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

  /** Replaces the first `"id":"…"` (the chunk's own id comes first in every server we face). */
  private rewriteId(data: string): string {
    const at = data.indexOf('"id":"');
    if (at === -1 || at > 16) {
      const parsed = this.parse(data);
      if (parsed === null) return data;
      parsed.id = this.id;
      return JSON.stringify(parsed);
    }
    const start = at + 6;
    const end = data.indexOf('"', start);
    if (end === -1) return data;
    return data.slice(0, start) + this.id + data.slice(end);
  }
}

/**
 * As stringLiteralEnd, on the bytes `buf[start, end)`; a literal that is not valid UTF-8 is
 * refused too, so such a frame takes the slow path, whose decoding repairs it (a client's
 * strict UTF-8 decoder would otherwise fail on the whole event).
 */
function byteLiteralEnd(buf: Buffer, start: number, end: number): number {
  if (buf[start] !== 34) return -1;
  for (let i = start + 1; i < end; i++) {
    const c = buf[i] as number;
    if (c === 34) return i + 1;
    if (c < 0x20) return -1;
    if (c === 92) {
      const x = buf[++i];
      if (x === 117) {
        for (let k = 0; k < 4; k++) if (!isHexByte(buf[++i])) return -1;
      } else if (x !== 34 && x !== 92 && x !== 47 && x !== 98 && x !== 102 && x !== 110 && x !== 114 && x !== 116) {
        return -1;
      }
    } else if (c >= 0x80) {
      const n = utf8SequenceEnd(buf, i, end);
      if (n === -1) return -1;
      i = n - 1;
    }
  }
  return -1;
}

/** The end of the well-formed UTF-8 sequence (RFC 3629) that starts at `i`, or -1. */
function utf8SequenceEnd(buf: Buffer, i: number, end: number): number {
  const c = buf[i] as number;
  let n: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 1;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 2;
    if (c === 0xe0) lo = 0xa0;
    else if (c === 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 3;
    if (c === 0xf0) lo = 0x90;
    else if (c === 0xf4) hi = 0x8f;
  } else return -1;
  if (i + n >= end) return -1;
  const first = buf[i + 1] as number;
  if (first < lo || first > hi) return -1;
  for (let k = 2; k <= n; k++) {
    const b = buf[i + k] as number;
    if (b < 0x80 || b > 0xbf) return -1;
  }
  return i + n + 1;
}

function isHexByte(c: number | undefined): boolean {
  return c !== undefined && ((c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102));
}
