import { isUtf8 } from 'node:buffer';
import { ByteRun, viewOf } from '../../wire/byte-run.js';
import { tokenCount } from '../../wire/chat-response.js';
import { MAX_LAYOUT_BYTES } from '../../wire/event-layouts.js';
import {
  byteLiteralEnd,
  canonicalLiteralEnd,
  canonicalNumberEnd,
  digitsValue,
  idEnd,
  numberEnd,
  safeDigitsEnd,
} from '../../wire/json-bytes.js';

type Json = Record<string, unknown>;

const LF = 10;
const CR = 13;
/** Hole kinds: any string literal or number, one JSON.stringify writes as it is, the sequence number, the response id's text. */
const STRING = 0;
const CANONICAL_STRING = 1;
const NUMBER = 2;
const CANONICAL_NUMBER = 3;
const SEQUENCE = 4;
const RESPONSE_ID = 5;
/** Nesting a learned event may have: deeper ones are parsed each time. */
const MAX_DEPTH = 32;

/** The token counts of a Responses answer's usage (`input_tokens`, `output_tokens`, reasoning). */
export interface ResponsesCounts {
  prompt: number | null;
  completion: number | null;
  reasoning: number;
}

/** The counts of a terminal event's `response.usage`, where each is a token count. */
export function usageCounts(usage: unknown): ResponsesCounts {
  const u = typeof usage === 'object' && usage !== null ? (usage as Json) : null;
  const details = u?.output_tokens_details;
  const reasoning =
    typeof details === 'object' && details !== null ? tokenCount((details as Json).reasoning_tokens) : null;
  return { prompt: tokenCount(u?.input_tokens), completion: tokenCount(u?.output_tokens), reasoning: reasoning ?? 0 };
}

/** What the relay's parsed path made of an event it sent (apis/responses/event-relay.ts). */
export interface CheckedEvent {
  /** Its `type`, also its `event:` line's name. */
  type: string;
  /** Its data, parsed, with our id in place of the response's where it carries one. */
  ev: Json;
  /** It carries the response object (an object, with a string id): its data goes out re-encoded. */
  carries: boolean;
  terminal: boolean;
  /** An output delta, counted as content. */
  delta: boolean;
}

/**
 * The byte layout of one kind of Responses stream event, learned from one the relay parsed:
 * `event: <type>` and `data: <json>` on two lines, literal runs with a hole between each two,
 * one per string and number value of the data except its `type`. A server's events of a kind
 * (response.created, output_item.added, …, response.completed) differ only in such values.
 *
 * Why a match gives the bytes the parsed path would send. A layout is learned from an event
 * that parsed as a JSON object whose `type` is its event line's name, that is not an error, and
 * whose bytes are valid UTF-8 with one LF and no CR. An event matches when its bytes are the
 * runs, in order, each hole holding a well-formed token of its kind, then a blank line: the
 * learned document with values replaced by values of the same type, so valid JSON with the same
 * keys, nesting, `type` and event name, which the parsed path judges alike (not an error, the
 * same `type`, a response object or not). Its `sequence_number` hole is an integer of 1 to 15
 * digits (a safe integer, as the parsed path reads it), and the usage counts of a terminal
 * event are read from their holes as JSON.parse reads a number. Runs hold the head's one LF
 * and no CR and holes no control character, so the blank line after the last run is where the
 * frame ends, as the relay's framing finds it.
 *
 * An event with no response object was sent as it came: a match is sent as it comes. One with
 * the response object was sent encoded again with our id: it is learned only when that
 * encoding is its own bytes with our id in place of the response id's text (no whitespace, keys
 * in parse order and none repeated, numbers and strings as JSON.stringify writes them), and its
 * holes take only such values (`canonicalLiteralEnd`, `canonicalNumberEnd`), so a match encoded
 * again is its own bytes with our id spliced in: what is sent.
 */
export class ResponsesLayout {
  /** Where each hole of the event `end` matched last starts and ends. */
  private readonly at: Int32Array;

  private readonly runs: ByteRun[];
  private readonly kinds: number[];
  readonly type: string;
  /** The hole of `sequence_number`, or -1 when the event has none. */
  private readonly sequenceHole: number;
  /** The hole of the response id's text, or -1 when the event carries no response. */
  private readonly idHole: number;
  readonly terminal: boolean;
  readonly delta: boolean;
  /** A terminal event's counts as the layout fixes them, and the number holes that give them instead. */
  private readonly fixed: ResponsesCounts;
  private readonly usageHoles: [number, number, number];

  /** From the runs between the holes `scan` found in the event the parsed path sent as `checked`. */
  private constructor(runs: ByteRun[], scan: Scan, checked: CheckedEvent) {
    this.runs = runs;
    this.kinds = scan.kinds;
    this.type = checked.type;
    this.sequenceHole = scan.sequenceHole;
    this.idHole = checked.carries ? scan.idHole : -1;
    this.terminal = checked.terminal;
    this.delta = checked.delta;
    this.fixed = checked.terminal ? usageCounts((checked.ev.response as Json | undefined)?.usage) : usageCounts(null);
    this.usageHoles = checked.terminal ? scan.usageHoles : [-1, -1, -1];
    this.at = new Int32Array(scan.kinds.length * 2);
  }

  /** Carries the response object: our id goes between `idStart` and `idEnd`. */
  get carries(): boolean {
    return this.idHole !== -1;
  }

  get idStart(): number {
    return this.at[this.idHole * 2] as number;
  }

  get idEnd(): number {
    return this.at[this.idHole * 2 + 1] as number;
  }

  /** The bytes of its runs. */
  get literalBytes(): number {
    let n = 0;
    for (const r of this.runs) n += r.length;
    return n;
  }

  /** The sequence number of the event matched last, the one after `last` when it has none (as the parsed path counts). */
  sequence(buf: Buffer, last: number): number {
    const h = this.sequenceHole;
    return h === -1 ? last + 1 : digitsValue(buf, this.at[h * 2] as number, this.at[h * 2 + 1] as number);
  }

  /** The usage counts of the terminal event matched last. */
  counts(buf: Buffer): ResponsesCounts {
    const [p, c, r] = this.usageHoles;
    const reasoning = r === -1 ? this.fixed.reasoning : (tokenCount(this.number(buf, r)) ?? 0);
    return {
      prompt: p === -1 ? this.fixed.prompt : tokenCount(this.number(buf, p)),
      completion: c === -1 ? this.fixed.completion : tokenCount(this.number(buf, c)),
      reasoning,
    };
  }

  private number(buf: Buffer, h: number): number {
    return Number(buf.toString('latin1', this.at[h * 2] as number, this.at[h * 2 + 1] as number));
  }

  /**
   * Where the event at `s` that has this layout ends (just past its blank line), its holes
   * noted; -1 when it does not match, or its frame would be more than `max` bytes (the parsed
   * path refuses it).
   */
  end(buf: Buffer, s: number, max: number): number {
    const view = viewOf(buf);
    const { runs, kinds, at } = this;
    const n = Math.min(buf.length, s + max);
    const holes = kinds.length;
    let pos = s;
    for (let i = 0; ; i++) {
      const run = runs[i] as ByteRun;
      if (!run.at(view, buf, pos, n)) return -1;
      pos += run.length;
      if (i === holes) break;
      const start = pos;
      switch (kinds[i]) {
        case STRING:
          pos = byteLiteralEnd(buf, pos, n);
          break;
        case CANONICAL_STRING:
          pos = canonicalLiteralEnd(buf, pos, n);
          break;
        case NUMBER:
          pos = numberEnd(buf, pos, n);
          break;
        case CANONICAL_NUMBER:
          pos = canonicalNumberEnd(buf, pos, n);
          break;
        case SEQUENCE:
          pos = safeDigitsEnd(buf, pos, n);
          break;
        default:
          pos = idEnd(buf, pos, n);
      }
      if (pos === -1) return -1;
      at[i * 2] = start;
      at[i * 2 + 1] = pos;
    }
    if (pos + 2 > n || buf[pos] !== LF || buf[pos + 1] !== LF) return -1;
    return pos + 2;
  }

  sameAs(other: ResponsesLayout): boolean {
    return (
      this.type === other.type &&
      this.runs.length === other.runs.length &&
      this.kinds.every((k, i) => k === other.kinds[i]) &&
      this.runs.every((r, i) => r.equals(other.runs[i] as ByteRun))
    );
  }

  /**
   * The layout of the frame `buf[s, next)` that the parsed path sent as `checked` says, for the
   * stream whose id is `id`; null when it has not the shape the class comment asks.
   */
  static learn(buf: Buffer, s: number, next: number, checked: CheckedEvent, id: string): ResponsesLayout | null {
    const e = next - 2;
    if (e <= s || buf[e] !== LF || buf[e + 1] !== LF) return null;
    const head = Buffer.from(`event: ${checked.type}\ndata: `, 'utf8');
    const dataStart = s + head.length;
    if (dataStart >= e || buf.compare(head, 0, head.length, s, dataStart) !== 0) return null;
    const lf = buf.indexOf(LF, dataStart);
    const cr = buf.indexOf(CR, s);
    if ((lf !== -1 && lf < e) || (cr !== -1 && cr < e) || !isUtf8(buf.subarray(s, e))) return null;
    const scan = new Scan(buf, e, checked);
    if (scan.value(dataStart, 0) !== e) return null;
    const { holes, kinds } = scan;
    const idHole = checked.carries ? scan.idHole : -1;
    if (checked.carries) {
      if (idHole === -1) return null;
      const again = JSON.stringify(checked.ev);
      const spliced = Buffer.concat([
        buf.subarray(dataStart, holes[idHole * 2] as number),
        Buffer.from(id, 'utf8'),
        buf.subarray(holes[idHole * 2 + 1] as number, e),
      ]);
      if (!spliced.equals(Buffer.from(again, 'utf8'))) return null;
    }
    const runs: ByteRun[] = [];
    let pos = s;
    let literal = 0;
    for (let i = 0; i < kinds.length; i++) {
      const start = holes[i * 2] as number;
      runs.push(new ByteRun(Buffer.from(buf.subarray(pos, start))));
      literal += start - pos;
      pos = holes[i * 2 + 1] as number;
    }
    runs.push(new ByteRun(Buffer.from(buf.subarray(pos, e))));
    literal += e - pos;
    if (literal > MAX_LAYOUT_BYTES) return null;
    return new ResponsesLayout(runs, scan, checked);
  }
}

/** The holes of a learned event's data, found by reading it as JSON, value by value. */
class Scan {
  /** Start and end of each hole. */
  readonly holes: number[] = [];
  readonly kinds: number[] = [];
  sequenceHole = -1;
  idHole = -1;
  /** The number holes of `response.usage`'s input, output and reasoning counts. */
  readonly usageHoles: [number, number, number] = [-1, -1, -1];
  /** The keys from the data's top down to the value being read (null for an array's element). */
  private readonly path: (string | null)[] = [];

  constructor(
    private readonly buf: Buffer,
    private readonly end: number,
    private readonly checked: CheckedEvent,
  ) {}

  /** Reads the value at `pos` (after whitespace); returns where it ends (before whitespace after it), or -1. */
  value(pos: number, depth: number): number {
    const { buf, end, path } = this;
    pos = this.space(pos);
    const c = buf[pos];
    const canonical = this.checked.carries;
    if (c === 0x7b || c === 0x5b) {
      if (depth >= MAX_DEPTH) return -1;
      const close = c === 0x7b ? 0x7d : 0x5d;
      pos = this.space(pos + 1);
      if (buf[pos] === close) return pos + 1;
      for (;;) {
        if (c === 0x7b) {
          const keyEnd = byteLiteralEnd(buf, pos, end);
          if (keyEnd === -1) return -1;
          path.push(JSON.parse(buf.toString('utf8', pos, keyEnd)) as string);
          pos = this.space(keyEnd);
          if (buf[pos] !== 0x3a) return -1;
          pos++;
        } else path.push(null);
        pos = this.value(pos, depth + 1);
        path.pop();
        if (pos === -1) return -1;
        pos = this.space(pos);
        if (buf[pos] === close) return pos + 1;
        if (buf[pos] !== 0x2c) return -1;
        pos++;
      }
    }
    if (c === 0x22) {
      const stop = (canonical ? canonicalLiteralEnd : byteLiteralEnd)(buf, pos, end);
      if (stop === -1) return -1;
      if (path.length === 1 && path[0] === 'type') return stop;
      if (canonical && path.length === 2 && path[0] === 'response' && path[1] === 'id') {
        if (idEnd(buf, pos + 1, end) !== stop - 1) return -1;
        this.idHole = this.hole(RESPONSE_ID, pos + 1, stop - 1);
        return stop;
      }
      this.hole(canonical ? CANONICAL_STRING : STRING, pos, stop);
      return stop;
    }
    if (c === 0x2d || (c !== undefined && c >= 0x30 && c <= 0x39)) {
      if (path.length === 1 && path[0] === 'sequence_number') {
        const stop = safeDigitsEnd(buf, pos, end);
        if (stop === -1 || stop !== numberEnd(buf, pos, end)) return -1;
        this.sequenceHole = this.hole(SEQUENCE, pos, stop);
        return stop;
      }
      const stop = (canonical ? canonicalNumberEnd : numberEnd)(buf, pos, end);
      if (stop === -1 || stop !== numberEnd(buf, pos, end)) return -1;
      const h = this.hole(canonical ? CANONICAL_NUMBER : NUMBER, pos, stop);
      const usage = this.usageIndex();
      if (usage !== -1) this.usageHoles[usage] = h;
      return stop;
    }
    for (const word of ['true', 'false', 'null']) {
      if (buf.toString('latin1', pos, Math.min(end, pos + word.length)) === word) return pos + word.length;
    }
    return -1;
  }

  private space(pos: number): number {
    const buf = this.buf;
    while (pos < this.end && (buf[pos] === 0x20 || buf[pos] === 0x09)) pos++;
    return pos;
  }

  private hole(kind: number, start: number, stop: number): number {
    this.kinds.push(kind);
    this.holes.push(start, stop);
    return this.kinds.length - 1;
  }

  /** Which usage count the value being read is (0 input, 1 output, 2 reasoning), or -1. */
  private usageIndex(): number {
    const p = this.path;
    if (p[0] !== 'response' || p[1] !== 'usage') return -1;
    if (p.length === 3) return p[2] === 'input_tokens' ? 0 : p[2] === 'output_tokens' ? 1 : -1;
    return p.length === 4 && p[2] === 'output_tokens_details' && p[3] === 'reasoning_tokens' ? 2 : -1;
  }
}
