const QUOTE = 34;
const BACKSLASH = 92;

// Scanners of JSON tokens in an event's bytes, for the layouts that forward events unparsed
// (event-layouts.ts, apis/responses/event-layout.ts): each says where a well-formed token ends, or -1,
// and the layout then sends the event the parsed way.

/**
 * From the first byte of an id's text: the index of its closing quote, when the id is 1 to 128
 * printable ASCII characters without escapes; otherwise -1.
 */
export function idEnd(buf: Buffer, start: number, end: number): number {
  const limit = Math.min(end, start + 129);
  for (let i = start; i < limit; i++) {
    const c = buf[i] as number;
    if (c === QUOTE) return i > start ? i : -1;
    if (c < 0x20 || c > 0x7e || c === BACKSLASH) return -1;
  }
  return -1;
}

/** The end of a JSON integer's digits at `start` (`0`, or 1 to 16 digits without a leading zero), or -1. */
export function digitsEnd(buf: Buffer, start: number, end: number): number {
  const first = buf[start];
  if (first === undefined || start >= end || first < 48 || first > 57) return -1;
  if (first === 48) return start + 1;
  const limit = Math.min(end, start + 16);
  let i = start + 1;
  while (i < limit && (buf[i] as number) >= 48 && (buf[i] as number) <= 57) i++;
  return i < end && (buf[i] as number) >= 48 && (buf[i] as number) <= 57 ? -1 : i;
}

/**
 * `buf[start]` must open a JSON string literal; returns the index just past its closing quote,
 * or -1 when it is not a well-formed literal before `end` (control characters, bad escapes, no
 * end) or not valid UTF-8: such an event takes the slow path, whose decoding repairs it (a
 * client's strict UTF-8 decoder would otherwise fail on the whole event).
 */
export function byteLiteralEnd(buf: Buffer, start: number, end: number): number {
  if (buf[start] !== QUOTE) return -1;
  for (let i = start + 1; i < end; i++) {
    const c = buf[i] as number;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      const x = buf[++i];
      if (x === 117) {
        for (let k = 0; k < 4; k++) if (!isHexByte(buf[++i])) return -1;
      } else if (x !== 34 && x !== 92 && x !== 47 && x !== 98 && x !== 102 && x !== 110 && x !== 114 && x !== 116) {
        return -1;
      }
    } else if (c >= 0x80) {
      const next = utf8SequenceEnd(buf, i, end);
      if (next === -1) return -1;
      i = next - 1;
    }
  }
  return -1;
}

/** The end of the well-formed UTF-8 sequence (RFC 3629) that starts at `i`, or -1. */
function utf8SequenceEnd(buf: Buffer, i: number, end: number): number {
  const c = buf[i] as number;
  let n: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 2;
    if (c === 0xe0) lo = 0xa0;
    else if (c === 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 3;
    if (c === 0xf0) lo = 0x90;
    else if (c === 0xf4) hi = 0x8f;
  } else {
    return -1;
  }
  if (i + n >= end) return -1;
  const first = buf[i + 1] as number;
  if (first < lo || first > hi) return -1;
  for (let k = 2; k <= n; k++) {
    const b = buf[i + k] as number;
    if (b < 0x80 || b > 0xbf) return -1;
  }
  return i + n + 1;
}

function isHexByte(c: number | undefined): boolean {
  return c !== undefined && ((c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102));
}

/** The most digits of an integer a layout takes as a hole: 15 keep it a safe integer. */
const MAX_DIGITS = 15;

/** The end of a JSON integer at `start` (`0`, or 1 to 15 digits without a leading zero), or -1. */
export function safeDigitsEnd(buf: Buffer, start: number, end: number): number {
  if (start >= end) return -1;
  const first = buf[start] as number;
  if (first < 48 || first > 57) return -1;
  if (first === 48) return start + 1 < end && isDigit(buf[start + 1] as number) ? -1 : start + 1;
  let i = start + 1;
  while (i < end && isDigit(buf[i] as number)) i++;
  return i - start > MAX_DIGITS ? -1 : i;
}

/** The value of the digits `buf[start, end)`. */
export function digitsValue(buf: Buffer, start: number, end: number): number {
  let v = 0;
  for (let i = start; i < end; i++) v = v * 10 + ((buf[i] as number) - 48);
  return v;
}

/** The end of a JSON number at `start` (RFC 8259's grammar), or -1. */
export function numberEnd(buf: Buffer, start: number, end: number): number {
  let i = start;
  if (i < end && buf[i] === 45) i++;
  if (i >= end || !isDigit(buf[i] as number)) return -1;
  if (buf[i] === 48) i++;
  else while (i < end && isDigit(buf[i] as number)) i++;
  if (i < end && buf[i] === 46) {
    i++;
    if (i >= end || !isDigit(buf[i] as number)) return -1;
    while (i < end && isDigit(buf[i] as number)) i++;
  }
  if (i < end && (buf[i] === 101 || buf[i] === 69)) {
    i++;
    if (i < end && (buf[i] === 43 || buf[i] === 45)) i++;
    if (i >= end || !isDigit(buf[i] as number)) return -1;
    while (i < end && isDigit(buf[i] as number)) i++;
  }
  return i;
}

/**
 * The end of a number at `start` written as JSON.stringify writes its value, or -1 (the number
 * may be well-formed still). Taken: an integer of 1 to 15 digits without a leading zero (not
 * `-0`), or a fraction with 1 to 15 significant digits, the last not 0, and fewer than 6 zeros
 * between the point and the first digit of a value under 1. A decimal of at most 15 significant
 * digits is the only one of its length or shorter that reads as its double, and JavaScript
 * writes a double as its shortest such decimal, in this notation for values from 1e-6 to 1e21.
 */
export function canonicalNumberEnd(buf: Buffer, start: number, end: number): number {
  let i = start;
  const negative = i < end && buf[i] === 45;
  if (negative) i++;
  const intStart = i;
  if (i >= end || !isDigit(buf[i] as number)) return -1;
  if (buf[i] === 48) i++;
  else while (i < end && isDigit(buf[i] as number)) i++;
  const intEnd = i;
  const zeroInt = intEnd - intStart === 1 && buf[intStart] === 48;
  if (i >= end || buf[i] !== 46) {
    if (i < end && (buf[i] === 101 || buf[i] === 69)) return -1;
    if (zeroInt && negative) return -1;
    return intEnd - intStart > MAX_DIGITS ? -1 : i;
  }
  i++;
  const fracStart = i;
  while (i < end && isDigit(buf[i] as number)) i++;
  const fracEnd = i;
  if (fracEnd === fracStart || buf[fracEnd - 1] === 48) return -1;
  if (i < end && (buf[i] === 101 || buf[i] === 69)) return -1;
  let significant: number;
  if (zeroInt) {
    let z = fracStart;
    while (buf[z] === 48) z++;
    if (z - fracStart >= 6) return -1;
    significant = fracEnd - z;
  } else significant = intEnd - intStart + fracEnd - fracStart;
  return significant > MAX_DIGITS ? -1 : i;
}

/**
 * `byteLiteralEnd` for a string JSON.stringify would write as it is: escapes only `\"`, `\\`,
 * `\b`, `\f`, `\n`, `\r` and `\t` (a `\u` escape or `\/` is written otherwise, or not escaped);
 * -1 for any other.
 */
export function canonicalLiteralEnd(buf: Buffer, start: number, end: number): number {
  if (buf[start] !== QUOTE) return -1;
  for (let i = start + 1; i < end; i++) {
    const c = buf[i] as number;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return -1;
    if (c === BACKSLASH) {
      const x = buf[++i];
      if (x !== 34 && x !== 92 && x !== 98 && x !== 102 && x !== 110 && x !== 114 && x !== 116) return -1;
    } else if (c >= 0x80) {
      const next = utf8SequenceEnd(buf, i, end);
      if (next === -1) return -1;
      i = next - 1;
    }
  }
  return -1;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}
