/**
 * The bytes for the client, gathered across the upstream reads of one turn of the event loop
 * and assembled once, when they are written. Each piece is an optional constant prefix (a
 * stream's own layout's) followed by a range of an input buffer: ranges, not slices, so no Buffer
 * object is made per frame, and the write is one exact allocation with each byte copied once.
 */
export class OutputBatch {
  private readonly prefixes: (Buffer | null)[] = [];
  private readonly sources: Buffer[] = [];
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  /** Bytes gathered so far. */
  length = 0;

  add(prefix: Buffer | null, source: Buffer, start: number, end: number): void {
    this.prefixes.push(prefix);
    this.sources.push(source);
    this.starts.push(start);
    this.ends.push(end);
    this.length += (prefix === null ? 0 : prefix.length) + end - start;
  }

  /** The gathered bytes as one Buffer; the batch is empty afterwards. */
  take(): Buffer {
    const out = Buffer.allocUnsafe(this.length);
    let pos = 0;
    const n = this.sources.length;
    const sources = this.sources;
    for (let i = 0; i < n; i++) {
      const prefix = this.prefixes[i] as Buffer | null;
      if (prefix !== null) {
        out.set(prefix, pos);
        pos += prefix.length;
      }
      const src = sources[i] as Buffer;
      const s = this.starts[i] as number;
      const e = this.ends[i] as number;
      // A token is a few bytes: a loop costs less than a native call's overhead.
      if (e - s <= 48) {
        for (let j = s; j < e; j++) out[pos++] = src[j] as number;
      } else {
        src.copy(out, pos, s, e);
        pos += e - s;
      }
    }
    // Emptied, so no upstream read stays pinned by a stream's batch past the write.
    this.prefixes.length = 0;
    this.sources.length = 0;
    this.starts.length = 0;
    this.ends.length = 0;
    this.length = 0;
    return out;
  }
}
