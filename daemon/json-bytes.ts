/**
 * JSON values written as UTF-8 straight into a Buffer, each returning the position after it. The
 * caller reserves the room first: no writer checks the Buffer's end. Strings and numbers come out
 * exactly as JSON.stringify writes them; the common case (printable ASCII, whole numbers) never
 * makes a string.
 */

/** The most bytes a JSON string takes per UTF-16 unit (`\u001f`; UTF-8 needs at most 3). */
export const JSON_BYTES_PER_UNIT = 6;
/** The most bytes a number takes (`-1.7976931348623157e+308`). */
export const NUMBER_BYTES_MAX = 24;

/** Bytes known in advance, copied: a short run byte by byte, cheaper than a call to `set`. */
export function putBytes(buf: Buffer, pos: number, bytes: Uint8Array): number {
  const n = bytes.length;
  if (n > 24) buf.set(bytes, pos);
  else for (let i = 0; i < n; i++) buf[pos + i] = bytes[i]!;
  return pos + n;
}

/** `s` as a JSON string: needs 2 + JSON_BYTES_PER_UNIT * s.length bytes of room. */
export function putJsonString(buf: Buffer, pos: number, s: string): number {
  const n = s.length;
  buf[pos] = 0x22;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return pos + buf.write(JSON.stringify(s), pos, 'utf8');
    buf[pos + 1 + i] = c;
  }
  buf[pos + 1 + n] = 0x22;
  return pos + 2 + n;
}

/** `n` as JSON writes it (String(n)): needs NUMBER_BYTES_MAX bytes of room. */
export function putNumber(buf: Buffer, pos: number, n: number): number {
  // Counts, statuses and milliseconds: non-negative 32-bit integers, digits made without a string.
  if ((n | 0) !== n || n < 0) return pos + buf.write(String(n), pos, 'latin1');
  let digits = 1;
  for (let t = 10; t <= n; t *= 10) digits++;
  const end = pos + digits;
  let p = end;
  let rest = n;
  do {
    const q = (rest / 10) | 0;
    buf[--p] = 0x30 + rest - q * 10;
    rest = q;
  } while (rest > 0);
  return end;
}
