/**
 * What a trace says of a streamed answer that the relay does not keep: the model the server
 * named and the last finish reason it gave. Read from the bytes as they pass, without decoding
 * or parsing an event (most events take the relay's fast path, which never parses them).
 *
 * Why a byte search is sound here: inside a JSON string a quote is always escaped, so the bytes
 * `"finish_reason"` followed by a colon can only be a key, never part of a token's text. Values
 * are read only when they are short strings of plain characters, so a hostile model server can
 * put nothing long or odd into a span. A key cut across reads is found in the stream's last bytes
 * (`tail`) joined with the start of the next read.
 */

const FINISH = Buffer.from('"finish_reason"');
const MODEL = Buffer.from('"model"');
/** The longest value kept; a longer one is not a model name or a finish reason a server sends. */
const MAX_VALUE = 128;
/** The longest key with its separator and value: how much of a read's end is kept for the seam. */
const TAIL = FINISH.length + 8 + MAX_VALUE;
const QUOTE = 0x22;

export class StreamFacts {
  model: string | null = null;
  finishReason: string | null = null;
  private tail: Buffer | null = null;

  push(chunk: Buffer): void {
    const tail = this.tail;
    if (tail !== null) this.scan(Buffer.concat([tail, chunk.subarray(0, TAIL)]));
    this.scan(chunk);
    // The last TAIL bytes of the stream so far, however short its reads are.
    if (chunk.length >= TAIL) this.tail = chunk.subarray(chunk.length - TAIL);
    else {
      const joined = tail === null ? chunk : Buffer.concat([tail, chunk]);
      this.tail = joined.length > TAIL ? joined.subarray(joined.length - TAIL) : joined;
    }
  }

  private scan(buf: Buffer): void {
    if (this.model === null) this.model = lastValue(buf, MODEL, true);
    const reason = lastValue(buf, FINISH, false);
    if (reason !== null) this.finishReason = reason;
  }
}

/** The string value of the last `key` in `buf` that has one; `first`: the first one instead. */
function lastValue(buf: Buffer, key: Buffer, first: boolean): string | null {
  let found: string | null = null;
  let at = buf.indexOf(key);
  while (at !== -1) {
    const v = valueAt(buf, at + key.length);
    if (v !== null) {
      if (first) return v;
      found = v;
    }
    at = buf.indexOf(key, at + key.length);
  }
  return found;
}

/** The string after `:` at `i` (spaces allowed around it), if short and plain; else null. */
function valueAt(buf: Buffer, i: number): string | null {
  while (i < buf.length && buf[i] === 0x20) i++;
  if (buf[i] !== 0x3a) return null;
  i++;
  while (i < buf.length && buf[i] === 0x20) i++;
  if (buf[i] !== QUOTE) return null;
  const start = i + 1;
  for (let j = start; j < buf.length && j - start <= MAX_VALUE; j++) {
    const b = buf[j] as number;
    if (b === QUOTE) return j === start ? null : buf.toString('latin1', start, j);
    // Printable ASCII without the backslash: an escape or a control byte is not kept.
    if (b < 0x20 || b > 0x7e || b === 0x5c) return null;
  }
  return null;
}
