import { CR, frameEnd, sseFields } from './sse-frames.js';
import type { InvalidReason } from './sse-relay.js';

/** What the frames of an event stream go to, one by one: a relay. */
export interface FrameSink {
  /** Nothing more is read: the stream ended or was refused. */
  readonly stopped: boolean;
  /**
   * Where the event at `start` ends when the sink takes it whole without framing (a learned
   * layout, its bytes already sent), else -1.
   */
  known(buf: Buffer, start: number): number;
  /** One frame: `text` its lines (its blank line left off), `buf[start, next)` its bytes. */
  frame(text: string, buf: Buffer, start: number, next: number): void;
  /** The stream is refused: nothing more is sent. */
  refuse(reason: InvalidReason): void;
}

/**
 * Cuts an event stream into frames, read by read: a frame ends at its first blank line (LF LF
 * or CRLF CRLF), and one split across reads is held, as a copy, until its end comes. A frame, or
 * a held tail, of `maxFrameBytes` or more refuses the stream (`frame_too_large`): a model server
 * that never ends its line must not make us hold its answer.
 */
export class SseFrameReader {
  private pieces: Buffer[] = [];
  private pendingBytes = 0;

  constructor(private readonly maxFrameBytes: number) {}

  read(chunk: Buffer, sink: FrameSink): void {
    if (sink.stopped) return;
    let buf = chunk;
    if (this.pendingBytes > 0) {
      this.pieces.push(chunk);
      buf = Buffer.concat(this.pieces, this.pendingBytes + chunk.length);
      this.pieces = [];
      this.pendingBytes = 0;
    }
    let start = 0;
    while (start < buf.length && !sink.stopped) {
      const known = sink.known(buf, start);
      if (known !== -1) {
        start = known;
        continue;
      }
      const next = frameEnd(buf, start);
      if (next === -1) break;
      if (next - start > this.maxFrameBytes) {
        sink.refuse('frame_too_large');
        return;
      }
      sink.frame(buf.toString('utf8', start, buf[next - 2] === CR ? next - 4 : next - 2), buf, start, next);
      start = next;
    }
    if (sink.stopped || start >= buf.length) return;
    const rest = buf.length - start;
    if (rest >= this.maxFrameBytes) {
      sink.refuse('frame_too_large');
      return;
    }
    // A copy: a piece must not pin its whole read. Joined once its frame ends.
    this.pieces.push(Buffer.from(buf.subarray(start)));
    this.pendingBytes = rest;
  }

  /** Drops what is held: the stream was refused. */
  clear(): void {
    this.pieces = [];
    this.pendingBytes = 0;
  }
}

/** A frame's `event:` name ('' when none) and its `data:` lines joined (null when none). */
export interface SseEvent {
  event: string;
  data: string | null;
}

/**
 * The fields of one frame's text: comments and blank lines are dropped, `data:` lines joined by
 * LF, the last `event:` kept, `id:` and `retry:` ignored; null when a line is none of these (no
 * event stream).
 */
export const sseEvent: (text: string) => SseEvent | null = sseFields;
