import { isUtf8 } from 'node:buffer';
import { ByteRun, viewOf } from '../../wire/byte-run.js';
import { MAX_LAYOUT_BYTES } from '../../wire/event-layouts.js';
import { byteLiteralEnd, digitsValue, safeDigitsEnd as digitsEnd } from '../../wire/json-bytes.js';

const LF = 10;
const CR = 13;
const DELTA_KEY = Buffer.from('"delta":"', 'latin1');
const SEQUENCE_KEY = Buffer.from('"sequence_number":', 'latin1');

/**
 * The byte layout of one kind of Responses stream event, learned within a stream from an event
 * the relay parsed (apis/responses/event-relay.ts): `event: <type>` and `data: <json>` on two lines,
 * with two holes, the `delta` string and the `sequence_number` integer. A stream's deltas
 * (`response.output_text.delta`, reasoning and argument deltas) differ only there, so after the
 * first of a kind each is matched and sent as its bytes, unparsed.
 *
 * Why a match is safe to forward unparsed (held by a differential test against the slow path,
 * test/unit/responses-relay-fast-path.test.ts). The layout is learned only from an event whose
 * data parsed as a JSON object, whose `type` is the event line's name, which carries no response
 * object (no id to replace) and is not an error, whose bytes are valid UTF-8 with no CR, and
 * which the slow path sent as it came (`event: <type>\ndata: <data>\n\n`). `"delta":"` and
 * `"sequence_number":` each occur once in it: their first quote cannot close a string (a letter
 * follows it, which no JSON token after a string allows), so it opens a key, and the quote after
 * the colon opens the value. An event matches when its bytes are the learned runs, in order,
 * with a string literal with valid escapes, no control character and valid UTF-8 in the one
 * hole, and an integer of 1 to 15 digits without a leading zero in the other, then a blank line:
 * the learned document with one string and one integer replaced, so valid JSON with the same
 * keys, types and `type`, which the slow path would have judged alike and sent as the same
 * bytes. Runs hold one LF (between the two lines) and no CR, holes no control character, so the
 * blank line after the last run is where the frame ends, as the relay's framing would find it.
 */
export class ResponsesEventLayout {
  /** The `sequence_number` of the event `end` matched last. */
  sequence = 0;

  private constructor(
    private readonly runs: [ByteRun, ByteRun, ByteRun],
    /** The string hole comes first (else the integer does). */
    private readonly stringFirst: boolean,
    /** Its type ends with `.delta`: an output delta, counted as content. */
    readonly delta: boolean,
  ) {}

  /**
   * The layout of the frame `buf[s, next)`, whose data parsed with type `type` and sequence
   * number `sequence` and was sent as it came; null when it does not have the shape above. Its
   * blank line is the two bytes before `next`: one that ends in CR LF CR LF has not that shape.
   */
  static learn(buf: Buffer, s: number, next: number, type: string, sequence: number): ResponsesEventLayout | null {
    const e = next - 2;
    if (buf[e] === CR) return null;
    const head = `event: ${type}\ndata: {`;
    if (e - s <= head.length || buf.toString('latin1', s, s + head.length) !== head) return null;
    // Two lines: the one LF is the head's, and no CR anywhere.
    if (before(buf.indexOf(LF, s + head.length), e) || before(buf.indexOf(CR, s), e)) return null;
    const deltaKey = buf.indexOf(DELTA_KEY, s);
    const seqKey = buf.indexOf(SEQUENCE_KEY, s);
    if (!before(deltaKey, e) || !before(seqKey, e)) return null;
    if (before(buf.indexOf(DELTA_KEY, deltaKey + 1), e) || before(buf.indexOf(SEQUENCE_KEY, seqKey + 1), e))
      return null;
    const strStart = deltaKey + DELTA_KEY.length - 1;
    const strEnd = byteLiteralEnd(buf, strStart, e);
    const digStart = seqKey + SEQUENCE_KEY.length;
    const digEnd = digitsEnd(buf, digStart, e);
    if (strEnd === -1 || digEnd === -1 || digitsValue(buf, digStart, digEnd) !== sequence) return null;
    if (!isUtf8(buf.subarray(s, e))) return null;
    const stringFirst = strStart < digStart;
    const [aStart, aEnd, bStart, bEnd] = stringFirst
      ? [strStart, strEnd, digStart, digEnd]
      : [digStart, digEnd, strStart, strEnd];
    if (aEnd > bStart) return null;
    if (e - s - (aEnd - aStart) - (bEnd - bStart) > MAX_LAYOUT_BYTES) return null;
    const runs: [ByteRun, ByteRun, ByteRun] = [
      new ByteRun(Buffer.from(buf.subarray(s, aStart))),
      new ByteRun(Buffer.from(buf.subarray(aEnd, bStart))),
      new ByteRun(Buffer.from(buf.subarray(bEnd, e))),
    ];
    return new ResponsesEventLayout(runs, stringFirst, type.endsWith('.delta'));
  }

  /**
   * Where the event at `s` that has this layout ends (just past its blank line), its sequence
   * number in `sequence`; -1 when it does not match, or its frame would be more than `max` bytes
   * (the slow path refuses it).
   */
  end(buf: Buffer, s: number, max: number): number {
    const view = viewOf(buf);
    const [r0, r1, r2] = this.runs;
    const n = Math.min(buf.length, s + max);
    let pos = s;
    if (!r0.at(view, buf, pos, n)) return -1;
    pos += r0.length;
    let digStart: number;
    let digEnd: number;
    if (this.stringFirst) {
      pos = byteLiteralEnd(buf, pos, n);
      if (pos === -1 || !r1.at(view, buf, pos, n)) return -1;
      digStart = pos + r1.length;
      pos = digEnd = digitsEnd(buf, digStart, n);
      if (pos === -1) return -1;
    } else {
      digStart = pos;
      digEnd = digitsEnd(buf, pos, n);
      if (digEnd === -1 || !r1.at(view, buf, digEnd, n)) return -1;
      pos = byteLiteralEnd(buf, digEnd + r1.length, n);
      if (pos === -1) return -1;
    }
    if (!r2.at(view, buf, pos, n)) return -1;
    pos += r2.length;
    if (pos + 2 > n || buf[pos] !== LF || buf[pos + 1] !== LF) return -1;
    this.sequence = digitsValue(buf, digStart, digEnd);
    return pos + 2;
  }
}

/** Whether `indexOf` found something before `e`. */
function before(at: number, e: number): boolean {
  return at !== -1 && at < e;
}
