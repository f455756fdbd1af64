/**
 * A JSON document held as bytes, parsed a member at a time: the top-level object's scalar and
 * object members whole, and its array members in pieces of about PIECE_BYTES, cut between two
 * elements. A store's snapshot holds a record per element, so no string is ever made of much more
 * than a piece. V8 caps a string at about 512 MiB: `JSON.parse(readFile(…, 'utf8'))` could not
 * load a store past about 950,000 keys, while a Buffer holds a few GiB.
 *
 * The bytes are scanned for structure only (quotes, backslashes, brackets, commas and colons, all
 * ASCII, so a UTF-8 continuation byte is never taken for one); each piece found is then given to
 * JSON.parse, which checks it. A document whose pieces do not join up as one object is refused
 * as JSON.parse would refuse it: with a SyntaxError.
 */

/**
 * Bytes of array elements parsed by one JSON.parse: a call per record (a million keys, as many
 * events) spent more on the calls and their strings than on the parsing.
 */
export const PIECE_BYTES = 1 << 20;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

function syntax(at: number, what: string): SyntaxError {
  return new SyntaxError(`${what} at byte ${at} of the store file`);
}

/**
 * The end (exclusive) of the string starting at `from` (its opening quote). A loop over the bytes:
 * a store's strings are short, and an indexOf a string cost more in its call than in its search.
 */
function stringEnd(buf: Buffer, from: number): number {
  const n = buf.length;
  let i = from + 1;
  while (i < n) {
    const b = buf[i] as number;
    if (b === QUOTE) return i + 1;
    i += b === BACKSLASH ? 2 : 1;
  }
  throw syntax(from, 'Unterminated string');
}

class Cursor {
  constructor(
    readonly buf: Buffer,
    public at = 0,
  ) {}

  skipSpace(): void {
    while (this.at < this.buf.length && isSpace(this.buf[this.at] as number)) this.at++;
  }

  peek(): number {
    this.skipSpace();
    if (this.at >= this.buf.length) throw syntax(this.at, 'Unexpected end of JSON');
    return this.buf[this.at] as number;
  }

  expect(byte: number, what: string): void {
    if (this.peek() !== byte) throw syntax(this.at, `Expected ${what}`);
    this.at++;
  }

  /** Skips one value, returning where it began and ended (exclusive). */
  value(): [number, number] {
    const start = (this.peek(), this.at);
    const first = this.buf[start] as number;
    if (first === QUOTE) {
      this.at = stringEnd(this.buf, start);
      return [start, this.at];
    }
    if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
      // A number, true, false or null: up to the next delimiter.
      let i = start;
      while (i < this.buf.length) {
        const b = this.buf[i] as number;
        if (b === COMMA || b === CLOSE_OBJECT || b === CLOSE_ARRAY || isSpace(b)) break;
        i++;
      }
      this.at = i;
      return [start, i];
    }
    let depth = 0;
    let i = start;
    while (i < this.buf.length) {
      const b = this.buf[i] as number;
      if (b === QUOTE) {
        i = stringEnd(this.buf, i);
        continue;
      }
      if (b === OPEN_OBJECT || b === OPEN_ARRAY) depth++;
      else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        depth--;
        if (depth === 0) {
          this.at = i + 1;
          return [start, this.at];
        }
      }
      i++;
    }
    throw syntax(start, 'Unexpected end of JSON');
  }

  parse([start, end]: [number, number]): unknown {
    return JSON.parse(this.buf.toString('utf8', start, end));
  }
}

/**
 * The elements of the array starting at the cursor, parsed a piece at a time: the elements
 * between two commas of the array's own level, at least PIECE_BYTES apart (or to its end).
 */
function parseArray(c: Cursor): unknown[] {
  c.expect(OPEN_ARRAY, "'['");
  const out: unknown[] = [];
  if (c.peek() === CLOSE_ARRAY) {
    c.at++;
    return out;
  }
  const buf = c.buf;
  const n = buf.length;
  const piece = (from: number, to: number): void => {
    const values = JSON.parse(`[${buf.toString('utf8', from, to)}]`) as unknown[];
    // A piece of nothing but space: the array ended in a comma, which JSON.parse refuses too.
    if (values.length === 0) throw syntax(from, 'Unexpected end of array');
    for (const v of values) out.push(v);
  };
  let start = c.at;
  let depth = 0;
  let i = start;
  while (i < n) {
    const b = buf[i] as number;
    if (b === QUOTE) {
      i = stringEnd(buf, i);
      continue;
    }
    if (b === OPEN_OBJECT || b === OPEN_ARRAY) depth++;
    else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
      if (depth === 0) {
        if (b !== CLOSE_ARRAY) throw syntax(i, "Expected ',' or ']'");
        piece(start, i);
        c.at = i + 1;
        return out;
      }
      depth--;
    } else if (b === COMMA && depth === 0 && i - start >= PIECE_BYTES) {
      piece(start, i);
      start = i + 1;
    }
    i++;
  }
  throw syntax(start, 'Unexpected end of JSON');
}

/**
 * `buf` parsed as JSON.parse would parse it, for a document that is an object; anything else is
 * parsed whole. Its array members are parsed element by element.
 */
export function parseJsonPieces(buf: Buffer): unknown {
  const c = new Cursor(buf);
  if (c.peek() !== OPEN_OBJECT) return JSON.parse(buf.toString('utf8'));
  c.at++;
  // No prototype: a "__proto__" member is kept as a member, as JSON.parse keeps it.
  const out = Object.create(null) as Record<string, unknown>;
  if (c.peek() === CLOSE_OBJECT) c.at++;
  else
    for (;;) {
      if (c.peek() !== QUOTE) throw syntax(c.at, 'Expected a member name');
      const name = c.parse(c.value()) as string;
      c.expect(COLON, "':'");
      out[name] = c.peek() === OPEN_ARRAY ? parseArray(c) : c.parse(c.value());
      const b = c.peek();
      c.at++;
      if (b === CLOSE_OBJECT) break;
      if (b !== COMMA) throw syntax(c.at - 1, "Expected ',' or '}'");
    }
  c.skipSpace();
  if (c.at !== buf.length) throw syntax(c.at, 'Unexpected data after the JSON document');
  // A plain object, as JSON.parse gives; each member defined, so a "__proto__" one stays a member.
  const plain: Record<string, unknown> = {};
  for (const k of Object.keys(out))
    Object.defineProperty(plain, k, { value: out[k], writable: true, enumerable: true, configurable: true });
  return plain;
}
