import { type EventLayout, EventLayouts, LayoutMatch } from './event-layouts.js';
import { OutputBatch } from './output-batch.js';
import { CR, frameEnd, heldFrameEnd } from './sse-frames.js';
import { type InvalidReason, SseEventCheck } from './sse-event-check.js';

// Imported from here by the other event relays and the stream relay.
export { frameEnd } from './sse-frames.js';
export type { InvalidReason, StreamUsage } from './sse-event-check.js';

const DONE = Buffer.from('data: [DONE]\n\n');

/**
 * Turns the model server's SSE bytes into what the client receives, frame by frame, as they
 * arrive: every chunk's `id` becomes ours (one per stream), the usage chunk is kept for
 * accounting and forwarded only when the client asked for it, and `[DONE]` ends the relay.
 * Bytes are split on frame boundaries only (sse-frames.ts), so a multi-byte character or a frame
 * cut across TCP reads is never corrupted. An event of no known layout is decoded and judged by
 * the event checker this relay extends (sse-event-check.ts).
 */
export class SseRelay extends SseEventCheck {
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

  /**
   * `layouts` are the event layouts of this stream's model server, shared by its streams; a
   * set of its own by default (tests, tools); null forces the slow path for every event
   * (config `relayFastPath`). A frame of more than `maxFrameBytes` bytes (its blank line
   * included), finished or not, is refused. `upstreamToken`, the instance's token for its model
   * server, never leaves in an error event (upstream-token-redaction.ts).
   */
  constructor(
    id: string,
    forwardUsage: boolean,
    layouts: EventLayouts | null = new EventLayouts(),
    private readonly maxFrameBytes = 1024 * 1024,
    upstreamToken?: string,
  ) {
    super(id, forwardUsage, upstreamToken);
    this.layouts = layouts;
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
      const end = heldFrameEnd(this.pieces, chunk);
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
          own.copyTo(out, own.prefix as Buffer, buf, start + own.skip, next);
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
        layout.copyTo(out, prefix, buf, m.copyFrom, next);
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

  protected override refuse(reason: InvalidReason): number {
    this.pieces = [];
    this.pendingBytes = 0;
    return super.refuse(reason);
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
}
