import { isUtf8 } from 'node:buffer';
import { byteLiteralEnd, digitsEnd, idEnd } from './json-bytes.js';
import type { OutputBatch } from './output-batch.js';

const LF = 10;
const CR = 13;
const LFLF = Buffer.from('\n\n');
/** Hole kinds: the chunk's id, the `created` number, a string value (the token). */
const ID = 0;
const DIGITS = 1;
const STRING = 2;

/**
 * The keys whose string value is a stream's token, the one hole of that kind a layout has: the
 * text (`content`), reasoning (`reasoning`, vLLM's older `reasoning_content`), a tool call's
 * argument fragments (vLLM) and a refusal. When an event has several, the last is the hole.
 */
/**
 * A learned event's bytes before its id's text, one of two (the relay learns only `data:` lines
 * whose first key is the id). The client gets the first, whichever the server wrote: the slow
 * path writes `data: ` before every event, and a server writing `data:{` (no space) had the
 * client get `data: {` for the events it parsed and `data:{` for those it copied, which a client
 * reading `data: ` lines (as many do) could not parse.
 */
const HEADS = [Buffer.from('data: {"id":"'), Buffer.from('data:{"id":"')];
/** What the client gets before our id: one shared object, so a relay makes its head once per stream. */
const OUT_HEAD = HEADS[0] as Buffer;

/**
 * The most bytes a layout keeps besides its holes. A layout is kept for the daemon's life (per
 * model server, four of them, for up to 10,000 servers), and a token event's literal bytes are
 * a few hundred; a layout of a whole frame (up to the frame cap, 1 MiB by default) made a model
 * server's few large events pin megabytes for good. An event with more is relayed by the slow
 * path, as every event of an unknown layout is.
 */
export const MAX_LAYOUT_BYTES = 4096;

const TOKEN_KEYS = ['"content":"', '"reasoning":"', '"reasoning_content":"', '"arguments":"', '"refusal":"'].map((k) =>
  Buffer.from(k, 'latin1'),
);

/**
 * Where an event matched a layout. One per relay, filled by `match`: a value made per event
 * would be an allocation per event on the hot path, and a learner shared by a server's streams
 * must not hold one stream's match for another to read.
 */
export class LayoutMatch {
  /** The layout matched; null before the first match. */
  layout: EventLayout | null = null;
  /** Just past the event's blank line. */
  end = -1;
  /** Where the id's text ends. */
  idEnd = -1;
  /**
   * Where the bytes the client gets of this event begin, after a prefix: the id's end for a
   * server's layout (after our head, `layout.head` and our id), the string for a stream's own
   * (after its `prefix`).
   */
  copyFrom = -1;
  /** The token's string literal, quotes included; -1 when the layout has none. */
  stringStart = -1;
  stringEnd = -1;
}

/** What a stream's own layout fixes of the event it was made from (EventLayout.forStream). */
interface OwnLayout {
  /** Where the id's text ends, from the event's start. */
  readonly idAt: number;
  /** The client's bytes before the string. */
  readonly prefix: Buffer;
}

/**
 * The byte layout of one kind of SSE event: literal runs with a hole between each two, learned
 * from an event that parsed.
 *
 * Why a match is safe to forward unparsed. A server's layout is learned from one event that
 * parsed as a JSON object, is not an error or usage event, and had only its id spliced by the
 * slow path; its holes are that event's id text (its first key's value), its `created` integer,
 * and one string value: the first byte after a token key such as `"content":"` (the quote after
 * the key's name follows a letter, and outside a string a letter before a quote could only end
 * `true`, `false` or `null`, which no token key ends with; so that quote closes a key and the
 * next one opens its value). An event matches when its bytes are the runs, in order, with holes
 * that are well-formed tokens of the same kind: an id of 1 to 128 printable ASCII characters
 * without quote or backslash, a JSON integer without a leading zero, a string literal with valid
 * escapes, no control character and valid UTF-8. That is the learned document with one string
 * replaced by another and one integer by another, so it is valid JSON too, with the same keys
 * and the same value types. No hole is the value of `error` or `usage` (holes are the values of
 * `id`, `created` and a token key, and an event with an `error` or `usage` object is never
 * learned), so the slow path would judge it as it judged the learned one (not an error, no
 * usage) and send the same bytes (our id spliced in). Runs hold no LF or CR (the learned event
 * was one line without CR) and holes no control character, so the blank line after the last run
 * is where the event ends, as the relay's framing would find it. A stream's own layout (`forStream`) is one event that matched, with its
 * id and `created` fixed and only the string a hole: the same argument, one compare cheaper.
 */
export class EventLayout {
  /** A stream's own layout: where the id's text ends, from the event's start; -1 when the id is a hole. */
  private readonly idAt: number;
  /**
   * A stream's own layout: the client's bytes before the string (our head, then the event's
   * bytes up to it), so one copy of a constant and one short range make the event; null for a
   * server's. (Copying the range from the id's end instead costs a native copy per event.)
   */
  readonly prefix: Buffer | null;

  /** `own`: what makes it a stream's own layout; null for a server's. */
  private constructor(
    /** What the client gets before our id (`data: {"id":"`), whatever the event's bytes before its id. */
    readonly head: Buffer,
    private readonly runs: Buffer[],
    private readonly holes: number[],
    /** Ended by CRLF CRLF (sse-starlette servers), not LF LF: the client gets LF LF. */
    readonly crlf: boolean,
    own: OwnLayout | null,
  ) {
    this.idAt = own === null ? -1 : own.idAt;
    this.prefix = own === null ? null : own.prefix;
  }

  /**
   * The layout of the event `buf[s, e)`, ended by the blank line `buf[e, next)`, which the slow
   * path has checked (see the class comment); null when its id is not its first key or not plain
   * ASCII, or its bytes are not UTF-8.
   */
  static learn(buf: Buffer, s: number, e: number, next: number): EventLayout | null {
    // The id must be the event's first key: `data: {"id":"` (an id nested deeper is not its own).
    const key = buf.indexOf('"id":"', s, 'latin1');
    if ((key !== s + 7 || buf[s + 5] !== 32) && key !== s + 6) return null;
    if (buf[key - 1] !== 0x7b || key >= e) return null;
    const idStart = key + 6;
    const idStop = idEnd(buf, idStart, e);
    if (idStop === -1 || !isUtf8(buf.subarray(s, e))) return null;
    const head = HEADS.find((h) => h.length === idStart - s && buf.compare(h, 0, h.length, s, idStart) === 0);
    if (head === undefined) return null;
    // Runs as views of the event until its size is judged, then copied (a run must not pin the read).
    const runs: Buffer[] = [head];
    const holes: number[] = [ID];
    let holeBytes = idStop - idStart;
    let pos = idStop;
    const created = buf.indexOf(',"created":', idStop, 'latin1');
    if (created !== -1 && created < e) {
      const digitsStart = created + 11;
      const digitsStop = digitsEnd(buf, digitsStart, e);
      if (digitsStop !== -1) {
        runs.push(buf.subarray(pos, digitsStart));
        holes.push(DIGITS);
        holeBytes += digitsStop - digitsStart;
        pos = digitsStop;
      }
    }
    let token = -1;
    let tokenKey = 0;
    for (const k of TOKEN_KEYS) {
      const at = buf.lastIndexOf(k, e - k.length, 'latin1');
      if (at > token) {
        token = at;
        tokenKey = k.length;
      }
    }
    if (token >= pos) {
      const litStart = token + tokenKey - 1;
      const litStop = byteLiteralEnd(buf, litStart, e);
      if (litStop !== -1) {
        runs.push(buf.subarray(pos, litStart));
        holes.push(STRING);
        holeBytes += litStop - litStart;
        pos = litStop;
      }
    }
    if (e - s - holeBytes > MAX_LAYOUT_BYTES) return null;
    runs.push(buf.subarray(pos, e));
    for (let i = 1; i < runs.length; i++) runs[i] = Buffer.from(runs[i] as Buffer);
    return new EventLayout(OUT_HEAD, runs, holes, next - e === 4, null);
  }

  /**
   * Whether the event at `s` has this layout and ends in its blank line; if so, `m` says where
   * it ends, where its id ends and where its string hole is.
   */
  match(buf: Buffer, s: number, m: LayoutMatch): boolean {
    const { runs, holes } = this;
    const n = buf.length;
    let pos = s;
    let idStop = this.idAt === -1 ? -1 : s + this.idAt;
    let stringStart = -1;
    let stringEnd = -1;
    for (let i = 0; ; i++) {
      const run = runs[i] as Buffer;
      const len = run.length;
      if (pos + len > n) return false;
      // A native compare costs a fixed ~0.2 µs: short runs are cheaper compared in a loop.
      if (len <= 48) {
        for (let j = 0; j < len; j++) if (buf[pos + j] !== run[j]) return false;
      } else if (buf.compare(run, 0, len, pos, pos + len) !== 0) {
        return false;
      }
      pos += len;
      if (i === holes.length) break;
      const hole = holes[i];
      if (hole === ID) {
        pos = idStop = idEnd(buf, pos, n);
      } else if (hole === DIGITS) {
        pos = digitsEnd(buf, pos, n);
      } else {
        stringStart = pos;
        pos = stringEnd = byteLiteralEnd(buf, pos, n);
      }
      if (pos === -1) return false;
    }
    if (this.crlf) {
      if (pos + 4 > n || buf[pos] !== CR || buf[pos + 1] !== LF || buf[pos + 2] !== CR || buf[pos + 3] !== LF)
        return false;
      pos += 4;
    } else {
      if (pos + 2 > n || buf[pos] !== LF || buf[pos + 1] !== LF) return false;
      pos += 2;
    }
    m.layout = this;
    m.end = pos;
    m.idEnd = idStop;
    m.copyFrom = this.prefix === null ? idStop : stringStart;
    m.stringStart = stringStart;
    m.stringEnd = stringEnd;
    return true;
  }

  /**
   * Adds `prefix`, then the bytes `buf[from, next)` of an event it matched, its blank line as
   * LF LF whichever way the server ended it.
   */
  copyTo(out: OutputBatch, prefix: Buffer, buf: Buffer, from: number, next: number): void {
    if (this.crlf) {
      out.add(prefix, buf, from, next - 4);
      out.add(LFLF, buf, next, next);
    } else {
      out.add(prefix, buf, from, next);
    }
  }

  /** The bytes of its runs. */
  get literalBytes(): number {
    return this.runs.reduce((n, r) => n + r.length, 0);
  }

  /** A stream's own layout: bytes from the event's start to its string, which the client gets after `prefix`. */
  get skip(): number {
    return (this.runs[0] as Buffer).length;
  }

  /**
   * `match` for a stream's own layout (one run, the token, one run), written out and without a
   * `LayoutMatch` to fill: the event's end (just past its blank line), or -1. Most of a stream's
   * events come here; the generic loop, and filling the match, cost about 200 instructions more
   * per event than 874cc1c's template match (docs/performance.md).
   */
  ownEnd(buf: Buffer, s: number): number {
    const runs = this.runs;
    const first = runs[0] as Buffer;
    const n = buf.length;
    const fl = first.length;
    if (s + fl >= n || buf.compare(first, 0, fl, s, s + fl) !== 0) return -1;
    const stringEnd = byteLiteralEnd(buf, s + fl, n);
    if (stringEnd === -1) return -1;
    const last = runs[1] as Buffer;
    const ll = last.length;
    const e = stringEnd + ll;
    if (e + (this.crlf ? 4 : 2) > n) return -1;
    for (let i = 0; i < ll; i++) if (buf[stringEnd + i] !== last[i]) return -1;
    if (this.crlf) return buf[e] === CR && buf[e + 1] === LF && buf[e + 2] === CR && buf[e + 3] === LF ? e + 4 : -1;
    return buf[e] === LF && buf[e + 1] === LF ? e + 2 : -1;
  }

  /**
   * The layout of the event `m` just matched at `s` (it must have a string hole), with its id and
   * `created` fixed, for the stream whose head (our `head` and its id) is `ourHead`: a stream's
   * events differ only in the token, and this layout is one compare and a literal scan.
   */
  forStream(buf: Buffer, s: number, m: LayoutMatch, ourHead: Buffer): EventLayout {
    const blank = this.crlf ? 4 : 2;
    const runs = [Buffer.from(buf.subarray(s, m.stringStart)), Buffer.from(buf.subarray(m.stringEnd, m.end - blank))];
    return new EventLayout(this.head, runs, [STRING], this.crlf, {
      idAt: m.idEnd - s,
      prefix: Buffer.concat([ourHead, buf.subarray(m.idEnd, m.stringStart)]),
    });
  }

  sameAs(other: EventLayout): boolean {
    return (
      this.crlf === other.crlf &&
      this.idAt === other.idAt &&
      this.holes.length === other.holes.length &&
      this.holes.every((h, i) => h === other.holes[i]) &&
      this.runs.every((r, i) => r.equals(other.runs[i] as Buffer))
    );
  }
}

/**
 * The layouts of a model server's stream events, shared by every stream from that server. A
 * server sends hundreds of events per stream that differ only in the id (per stream), `created`
 * (per second) and the token; shared, because every stream's first event and its finish event
 * would otherwise take the slow path (decode, parse, re-encode) each time.
 */
export class EventLayouts {
  private readonly layouts: EventLayout[] = [];

  constructor(private readonly max = 4) {}

  get size(): number {
    return this.layouts.length;
  }

  /** The bytes the layouts keep (each at most MAX_LAYOUT_BYTES); for tests. */
  get bytes(): number {
    return this.layouts.reduce((n, l) => n + l.literalBytes, 0);
  }

  /** Whether the event at `s` has a known layout (see `EventLayout.match`). */
  match(buf: Buffer, s: number, m: LayoutMatch): boolean {
    const layouts = this.layouts;
    for (let k = 0; k < layouts.length; k++) {
      const layout = layouts[k] as EventLayout;
      if (!layout.match(buf, s, m)) continue;
      // The layout seen last is tried first: a stream's events come in runs of one layout.
      if (k > 0) {
        layouts.splice(k, 1);
        layouts.unshift(layout);
      }
      return true;
    }
    return false;
  }

  /**
   * Learns the layout of a checked event (`EventLayout.learn`), unless it is known or cannot be
   * learned; returns the event's layout (the one known, or the one learned), or null.
   */
  learn(buf: Buffer, s: number, e: number, next: number): EventLayout | null {
    const layout = EventLayout.learn(buf, s, e, next);
    if (layout === null) return null;
    const known = this.layouts.find((l) => l.sameAs(layout));
    if (known !== undefined) return known;
    this.layouts.unshift(layout);
    if (this.layouts.length > this.max) this.layouts.pop();
    return layout;
  }
}

/** One EventLayouts per model server (instance), made on first use. */
export class EventLayoutsByServer {
  private readonly byKey = new Map<string, EventLayouts>();

  for(key: string): EventLayouts {
    let layouts = this.byKey.get(key);
    if (layouts === undefined) {
      // Instances come and go over a daemon's life; a few hundred bytes each, cleared past a bound.
      if (this.byKey.size >= 10_000) this.byKey.clear();
      layouts = new EventLayouts();
      this.byKey.set(key, layouts);
    }
    return layouts;
  }
}
