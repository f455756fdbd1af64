/** A chunk's size: a batch of FLUSH_LINES lines of about 330 bytes fits in one. */
const CHUNK_BYTES = 128 * 1024;

/**
 * The usage log's lines waiting to be written, as their UTF-8 bytes in preallocated chunks: a
 * line is written straight into `buf` at `pos`, never made a string nor joined. The chunk of the
 * write under way is used again for the next batch once that write ends.
 */
export class UsageBatch {
  buf: Buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  pos = 0;
  /** Chunks filled before `buf`, in order: only while a slow write lets lines pile up. */
  private full: Buffer[] = [];
  private spare: Buffer | null = null;

  /** The chunk to write the next line into, at `pos`, with at least `bound` bytes free. */
  reserve(bound: number): Buffer {
    if (this.pos + bound <= this.buf.length) return this.buf;
    if (this.pos > 0) this.full.push(this.buf.subarray(0, this.pos));
    this.buf = bound <= CHUNK_BYTES ? this.fresh() : Buffer.allocUnsafe(bound);
    this.pos = 0;
    return this.buf;
  }

  /** A line made as a string (the rare lines: refusals): its UTF-8 takes at most 3 bytes a unit. */
  putString(line: string): void {
    const buf = this.reserve(3 * line.length);
    this.pos += buf.write(line, this.pos, 'utf8');
  }

  /** The bytes held, in order; the batch starts again empty. Give them back once written. */
  take(): Buffer {
    const last = this.buf.subarray(0, this.pos);
    const bytes = this.full.length === 0 ? last : Buffer.concat([...this.full, last]);
    this.full = [];
    this.buf = this.fresh();
    this.pos = 0;
    return bytes;
  }

  /** Bytes from `take` now written: their chunk is the next one used, if a whole chunk. */
  giveBack(bytes: Buffer): void {
    if (bytes.byteOffset === 0 && bytes.buffer.byteLength === CHUNK_BYTES && bytes.buffer !== this.buf.buffer)
      this.spare = Buffer.from(bytes.buffer, 0, CHUNK_BYTES);
  }

  private fresh(): Buffer {
    const spare = this.spare;
    this.spare = null;
    return spare ?? Buffer.allocUnsafe(CHUNK_BYTES);
  }
}
