import { obError } from '../errors.js';

/**
 * The `data:` values of a server-sent event stream, parsed, for code that must read each event
 * (the Responses translation of a chat stream) rather than forward its bytes (sse-relay.ts).
 * Frames are found on the bytes (a blank line: LF LF, or CR LF CR LF), so a multi-byte
 * character or a frame cut across reads is decoded only once whole. `event:`, `id:`, `retry:`
 * and comment lines are skipped; the data lines of a frame are joined with LF, as the SSE
 * standard says. A frame of more than `maxFrameBytes`, finished or not, or data that is not
 * JSON, is refused with `upstream_error`.
 */

export type SseData = { done: true } | { done: false; value: unknown };

const LF = 10;
const CR = 13;

export class SseDataReader {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Why the last push threw: a frame past `maxFrameBytes`, or data that is not JSON. */
  refused: 'frame_too_large' | 'not_json' | null = null;

  constructor(private readonly maxFrameBytes = 1024 * 1024) {}

  /** Bytes of an unfinished frame held: for tests. */
  get pending(): number {
    return this.heldBytes;
  }

  /** The data of every frame that `chunk` completes, in order; `{done: true}` for `[DONE]`. */
  push(chunk: Buffer): SseData[] {
    const out: SseData[] = [];
    let buf = chunk;
    if (this.heldBytes > 0) {
      // Only the new bytes, and the last three held (a blank line cut across reads), are searched:
      // the held ones were searched already, so a frame dribbled byte by byte costs linear time.
      const last = this.held[this.held.length - 1] as Buffer;
      const tail = last.subarray(Math.max(0, last.length - 3));
      const end = frameEnd(Buffer.concat([tail, chunk]), 0);
      if (end === -1) {
        this.hold(chunk);
        return out;
      }
      buf = Buffer.concat([...this.held, chunk], this.heldBytes + chunk.length);
      this.held = [];
      this.heldBytes = 0;
    }
    let start = 0;
    for (;;) {
      const end = frameEnd(buf, start);
      if (end === -1) break;
      if (end.at - start > this.maxFrameBytes) this.tooLarge();
      const data = dataOf(buf.toString('utf8', start, end.at));
      if (data !== null) out.push(data === '[DONE]' ? { done: true } : { done: false, value: this.parse(data) });
      start = end.next;
    }
    if (start < buf.length) this.hold(buf.subarray(start));
    return out;
  }

  private parse(data: string): unknown {
    try {
      return JSON.parse(data);
    } catch {
      this.refused = 'not_json';
      throw obError('upstream_error', { message: 'The model server sent a stream event that is not JSON.' });
    }
  }

  private hold(bytes: Buffer): void {
    this.heldBytes += bytes.length;
    if (this.heldBytes > this.maxFrameBytes) this.tooLarge();
    // A copy: the caller may reuse its buffer once push returns.
    this.held.push(Buffer.from(bytes));
  }

  private tooLarge(): never {
    this.refused = 'frame_too_large';
    throw obError('upstream_error', {
      message: `The model server sent a stream event of more than ${this.maxFrameBytes} bytes.`,
    });
  }
}

/** Where the frame starting at `from` ends (its blank line excluded), and where the next begins; -1 if unfinished. */
function frameEnd(buf: Buffer, from: number): { at: number; next: number } | -1 {
  let i = buf.indexOf(LF, from);
  while (i !== -1) {
    if (buf[i + 1] === LF) return { at: i, next: i + 2 };
    if (buf[i + 1] === CR && buf[i + 2] === LF) return { at: i - (buf[i - 1] === CR ? 1 : 0), next: i + 3 };
    i = buf.indexOf(LF, i + 1);
  }
  return -1;
}

/** The joined data lines of one frame, or null when it has none. */
function dataOf(frame: string): string | null {
  let data: string | null = null;
  for (const raw of frame.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!line.startsWith('data:')) continue;
    const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
    data = data === null ? value : `${data}\n${value}`;
  }
  return data;
}
