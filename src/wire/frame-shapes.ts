import { isUtf8 } from 'node:buffer';

const LF = 10;
const QUOTE = 34;
const BACKSLASH = 92;
/** Hole kinds: the chunk's id, the `created` number, the content string. */
const ID = 0;
const DIGITS = 1;
const STRING = 2;

/**
 * The byte layout of one kind of SSE event: literal runs with a hole between each two. The first
 * hole is always the chunk's id (the event's bytes before it are the first run).
 */
interface Shape {
  runs: Buffer[];
  holes: number[];
}

/**
 * The layouts of a model server's stream events, learned from events that parsed and shared by
 * every stream from that server. A server sends hundreds of events per stream that differ only
 * in the id (per stream), `created` (per second) and the content string. An event made of a
 * learned layout's runs with well-formed holes is the learned JSON with one string replaced by
 * another and one number by another, so it is valid JSON too: it is forwarded as bytes, with
 * only its id replaced, and never decoded or parsed. Shared, because every stream's first event
 * and its finish event would otherwise take the slow path (decode, parse, re-encode) each time.
 */
export class FrameShapes {
  private readonly shapes: Shape[] = [];
  /**
   * Set by a successful match: the event's first run (up to the id), where the id ends, and
   * where its content string literal starts and ends (-1 when the layout has none).
   */
  head: Buffer = Buffer.alloc(0);
  idEnd = 0;
  litStart = -1;
  litEnd = -1;

  constructor(private readonly max = 4) {}

  get size(): number {
    return this.shapes.length;
  }

  /**
   * When the event at `s` has a known layout and ends in a blank line, returns the index just
   * past that line (and sets head and idEnd); otherwise -1. Runs learned from one event hold no
   * blank line and holes hold no control character, so that line is where the event ends.
   */
  match(buf: Buffer, s: number): number {
    const shapes = this.shapes;
    for (let k = 0; k < shapes.length; k++) {
      const shape = shapes[k] as Shape;
      const next = this.matchShape(shape, buf, s);
      if (next === -1) continue;
      // The layout seen last is tried first: a stream's events come in runs of one layout.
      if (k > 0) {
        shapes.splice(k, 1);
        shapes.unshift(shape);
      }
      return next;
    }
    return -1;
  }

  private matchShape(shape: Shape, buf: Buffer, s: number): number {
    const { runs, holes } = shape;
    const n = buf.length;
    let pos = s;
    this.litStart = -1;
    for (let i = 0; ; i++) {
      const run = runs[i] as Buffer;
      const len = run.length;
      if (pos + len > n) return -1;
      // A native compare costs a fixed ~0.2 µs: short runs are cheaper compared in a loop.
      if (len <= 24) {
        for (let j = 0; j < len; j++) if (buf[pos + j] !== run[j]) return -1;
      } else if (buf.compare(run, 0, len, pos, pos + len) !== 0) {
        return -1;
      }
      pos += len;
      if (i === holes.length) break;
      const hole = holes[i];
      if (hole === ID) {
        pos = idEnd(buf, pos, n);
        this.idEnd = pos;
      } else if (hole === DIGITS) {
        pos = digitsEnd(buf, pos, n);
      } else {
        this.litStart = pos;
        pos = byteLiteralEnd(buf, pos, n);
        this.litEnd = pos;
      }
      if (pos === -1) return -1;
    }
    if (pos + 2 > n || buf[pos] !== LF || buf[pos + 1] !== LF) return -1;
    this.head = runs[0] as Buffer;
    return pos + 2;
  }

  /**
   * Learns the layout of the event `buf[s, e)` (without its blank line), which has been checked
   * to be valid JSON with nothing to change but its id. Events whose id is not their first key
   * or not plain ASCII, or whose bytes are not UTF-8, are not learned.
   */
  learn(buf: Buffer, s: number, e: number): void {
    // The id must be the event's first key: `data: {"id":"` (an id nested deeper is not its own).
    const key = buf.indexOf('"id":"', s, 'latin1');
    if ((key !== s + 7 || buf[s + 5] !== 32) && key !== s + 6) return;
    if (buf[key - 1] !== 0x7b || key >= e) return;
    const idStart = key + 6;
    const idStop = idEnd(buf, idStart, e);
    if (idStop === -1 || !isUtf8(buf.subarray(s, e))) return;
    const runs: Buffer[] = [Buffer.from(buf.subarray(s, idStart))];
    const holes: number[] = [ID];
    let pos = idStop;
    const created = buf.indexOf(',"created":', idStop, 'latin1');
    if (created !== -1 && created < e) {
      const digitsStart = created + 11;
      const digitsStop = digitsEnd(buf, digitsStart, e);
      if (digitsStop !== -1) {
        runs.push(Buffer.from(buf.subarray(pos, digitsStart)));
        holes.push(DIGITS);
        pos = digitsStop;
      }
    }
    const content = buf.lastIndexOf('"content":"', e - 11, 'latin1');
    if (content >= pos) {
      const litStart = content + 10;
      const litStop = byteLiteralEnd(buf, litStart, e);
      if (litStop !== -1) {
        runs.push(Buffer.from(buf.subarray(pos, litStart)));
        holes.push(STRING);
        pos = litStop;
      }
    }
    runs.push(Buffer.from(buf.subarray(pos, e)));
    if (this.shapes.some((sh) => sameShape(sh, runs, holes))) return;
    this.shapes.unshift({ runs, holes });
    if (this.shapes.length > this.max) this.shapes.pop();
  }
}

function sameShape(shape: Shape, runs: Buffer[], holes: number[]): boolean {
  return shape.holes.length === holes.length
    && shape.holes.every((h, i) => h === holes[i])
    && shape.runs.every((r, i) => r.equals(runs[i] as Buffer));
}

/**
 * From the first byte of an id's text: the index of its closing quote, when the id is 1 to 128
 * printable ASCII characters without escapes; otherwise -1.
 */
function idEnd(buf: Buffer, start: number, end: number): number {
  const limit = Math.min(end, start + 129);
  for (let i = start; i < limit; i++) {
    const c = buf[i] as number;
    if (c === QUOTE) return i > start ? i : -1;
    if (c < 0x20 || c > 0x7e || c === BACKSLASH) return -1;
  }
  return -1;
}

/** The end of a JSON integer's digits at `start` (`0`, or 1 to 16 digits without a leading zero), or -1. */
function digitsEnd(buf: Buffer, start: number, end: number): number {
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

/** One FrameShapes per model server (instance), made on first use. */
export class FrameShapesByServer {
  private readonly byKey = new Map<string, FrameShapes>();

  for(key: string): FrameShapes {
    let shapes = this.byKey.get(key);
    if (shapes === undefined) {
      // Instances come and go over a daemon's life; a few hundred bytes each, cleared past a bound.
      if (this.byKey.size >= 10_000) this.byKey.clear();
      shapes = new FrameShapes();
      this.byKey.set(key, shapes);
    }
    return shapes;
  }
}
