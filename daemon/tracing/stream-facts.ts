/**
 * What a trace says of a streamed answer that the relay does not keep: the model the server
 * named and the last finish reason it gave. Both are read once, when the stream is over, from
 * the stream's first and last bytes: the model from its first event, the finish reason from the
 * event before the usage chunk and [DONE]. While it flows, a read costs an array push, not a
 * search: searching every read (64 a stream) doubled what a traced stream cost.
 *
 * Why a byte search is sound here: inside a JSON string a quote is always escaped, so the bytes
 * `"finish_reason"` followed by a colon can only be a key, never part of a token's text. Values
 * are kept only when they are short strings of plain characters, so a hostile model server can
 * put nothing long or odd into a span. A model server whose first event names no model within
 * HEAD bytes, or whose last WINDOW bytes hold no finish reason, leaves that attribute unset.
 */

/**
 * Why a stream ended, in the words of the API the model server spoke, tried in this order: chat's
 * `finish_reason`, Messages' `stop_reason` (in `message_delta`), then a Responses stream's
 * `incomplete_details.reason` and else the `status` of its last event, then Ollama's own stream's
 * `done_reason`. No stream of one API carries the others' keys, so the first found is the one
 * that counts.
 */
const FINISH_KEYS = ['"finish_reason"', '"stop_reason"', '"reason"', '"status"', '"done_reason"'].map((k) =>
  Buffer.from(k),
);
const MODEL = Buffer.from('"model"');
/** The longest value kept; a longer one is not a model name or a finish reason a server sends. */
const MAX_VALUE = 128;
/** The stream's first bytes searched for the model. */
const HEAD = 2048;
/** The stream's last bytes searched for the finish reason: the last content event, the usage chunk, [DONE]. */
const WINDOW = 4096;
const QUOTE = 0x22;

export class StreamFacts {
  /** The reads that make up the stream's first HEAD bytes (or fewer). */
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  /** The reads that make up its last WINDOW bytes at least. */
  private readonly tail: Buffer[] = [];
  private tailBytes = 0;

  push(chunk: Buffer): void {
    if (this.headBytes < HEAD) {
      this.head.push(chunk);
      this.headBytes += chunk.length;
    }
    const tail = this.tail;
    tail.push(chunk);
    this.tailBytes += chunk.length;
    // Reads no longer needed to make up WINDOW bytes are let go.
    while (this.tailBytes - (tail[0] as Buffer).length >= WINDOW) this.tailBytes -= (tail.shift() as Buffer).length;
  }

  /** The first model named in the stream's first bytes, if any. */
  model(): string | null {
    return this.head.length === 0 ? null : findValue(Buffer.concat(this.head), MODEL, false);
  }

  /** The last finish reason in the stream's last bytes, if any. */
  finishReason(): string | null {
    if (this.tail.length === 0) return null;
    const tail = Buffer.concat(this.tail);
    for (const key of FINISH_KEYS) {
      const v = findValue(tail, key, true);
      if (v !== null) return v;
    }
    return null;
  }
}

/**
 * The string value of the first `key` in `buf` that has one, or with `last` of the last one,
 * searched from the end: the stream's token events each carry `"finish_reason":null`, and the
 * one that counts is the last, so one search from the end usually finds it.
 */
function findValue(buf: Buffer, key: Buffer, last: boolean): string | null {
  let at = last ? buf.lastIndexOf(key) : buf.indexOf(key);
  while (at !== -1) {
    const v = valueAt(buf, at + key.length);
    if (v !== null) return v;
    at = last ? (at === 0 ? -1 : buf.lastIndexOf(key, at - 1)) : buf.indexOf(key, at + key.length);
  }
  return null;
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
