/**
 * A run of bytes a layout expects at some place in an upstream read, compared four bytes at a
 * time through a DataView of the read's memory. `Buffer.compare` with offsets costs a fixed
 * several hundred instructions in argument checks before its memcmp, and a loop over single
 * bytes a load, a compare and a branch per byte; a learned event is mostly such runs, so this
 * is most of what matching one costs.
 */
export class ByteRun {
  readonly length: number;
  /** The run's whole 32-bit words, little-endian, as `at` reads the input's. */
  private readonly words: Int32Array;

  constructor(readonly bytes: Buffer) {
    this.length = bytes.length;
    this.words = new Int32Array(bytes.length >> 2);
    for (let k = 0; k < this.words.length; k++) this.words[k] = bytes.readInt32LE(k * 4);
  }

  /** Whether the run is at `buf[pos…]`, wholly before `n` (at most `buf.length`); `view` is `viewOf(buf)`. */
  at(view: DataView, buf: Buffer, pos: number, n: number): boolean {
    const len = this.length;
    if (pos < 0 || pos + len > n) return false;
    const words = this.words;
    const w = words.length;
    let p = buf.byteOffset + pos;
    for (let k = 0; k < w; k++, p += 4) if (view.getInt32(p, true) !== words[k]) return false;
    const bytes = this.bytes;
    for (let j = w * 4; j < len; j++) if (buf[pos + j] !== bytes[j]) return false;
    return true;
  }

  equals(other: ByteRun): boolean {
    return this.bytes.equals(other.bytes);
  }
}

/**
 * The last view made, and the memory it covers. The events of one socket read are views into
 * that read's memory, so they share one; only the last is kept, so at most one read's memory is
 * held past its use, whatever the number of streams.
 */
let viewed: ArrayBufferLike | null = null;
let view: DataView = new DataView(new ArrayBuffer(0));

/** A DataView of all the memory under `buf` (offsets are `buf.byteOffset` on). */
export function viewOf(buf: Buffer): DataView {
  if (buf.buffer !== viewed) {
    viewed = buf.buffer;
    view = new DataView(buf.buffer);
  }
  return view;
}
