/**
 * The SSE frame splitter of the event relays: where a frame (an event and its blank line) ends
 * in the model server's bytes, found on the bytes themselves (a newline byte never occurs inside
 * a multi-byte UTF-8 character, so nothing is decoded to split them), and the fields of a frame
 * that is not a single `data:` line.
 */

export const LF = 10;
export const CR = 13;

/**
 * From `from`, the index just past the first blank line (two LFs or two CRLFs), or -1 when
 * there is none yet: the newlines are judged in order, each by the bytes around it.
 */
export function frameEnd(buf: Buffer, from: number): number {
  const n = buf.length;
  for (;;) {
    const nl = buf.indexOf(LF, from);
    if (nl === -1 || nl + 1 >= n) return -1;
    if (buf[nl + 1] === LF) return nl + 2;
    if (nl > 0 && buf[nl - 1] === CR && buf[nl + 1] === CR) {
      if (nl + 2 >= n) return -1;
      if (buf[nl + 2] === LF) return nl + 3;
    }
    from = nl + 1;
  }
}

/**
 * Where a frame held as `pieces` (an unfinished frame's bytes, kept from earlier reads) ends in
 * `c`, the next read: just past its blank line, or -1. A blank line may straddle the two
 * (`\n|\n`, `\r|\n\r\n`, `\r\n|\r\n`, `\r\n\r|\n`): the newlines in the held bytes' last two and
 * `c`'s first are judged with the held bytes' last three, as `frameEnd` would judge them in one
 * buffer; `c`'s later newlines lie wholly in `c`.
 */
export function heldFrameEnd(pieces: readonly Buffer[], c: Buffer): number {
  for (let nl = -2; nl <= 0; nl++) {
    if (byteAt(pieces, c, nl) !== LF) continue;
    const after = byteAt(pieces, c, nl + 1);
    if (after === -1) return -1;
    if (after === LF) return nl + 2;
    if (after === CR && byteAt(pieces, c, nl - 1) === CR) {
      const third = byteAt(pieces, c, nl + 2);
      if (third === -1) return -1;
      if (third === LF) return nl + 3;
    }
  }
  return c.length > 1 ? frameEnd(c, 1) : -1;
}

/** Byte `i` of `pieces` followed by `c` (negative: from the pieces' end); -1 past either end. */
function byteAt(pieces: readonly Buffer[], c: Buffer, i: number): number {
  if (i >= 0) return i < c.length ? (c[i] as number) : -1;
  for (let k = pieces.length - 1; k >= 0; k--) {
    const piece = pieces[k] as Buffer;
    if (-i <= piece.length) return piece[piece.length + i] as number;
    i += piece.length;
  }
  return -1;
}

/** The fields of a frame that is not a single `data:` line, or null when a line is not SSE. */
export function sseFields(frame: string): { data: string | null; event: string } | null {
  let data: string | null = null;
  let event = '';
  for (const raw of frame.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    // Blank, or a comment (a heartbeat).
    if (line === '' || line.charCodeAt(0) === 58) continue;
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (name === 'data') data = data === null ? value : `${data}\n${value}`;
    else if (name === 'event') event = value;
    else if (name !== 'id' && name !== 'retry') return null;
  }
  return { data, event };
}
