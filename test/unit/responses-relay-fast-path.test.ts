import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { OutputBatch } from '../../src/wire/output-batch.js';
import { ResponsesStreamRelay } from '../../src/apis/responses/event-relay.js';
import { runResponsesRelay } from '../helpers/responses-relay-run.js';

/**
 * The Responses relay's fast path (apis/responses/event-layout.ts) against its slow path: for any
 * stream, cut into reads anywhere, both send the same bytes and end the same way (done, error,
 * refusal and its reason, counts, the sequence number our error event would take). Streams are
 * Ollama's (keys sorted) or another server's key order, with deltas of any text, and hostile
 * frames mixed in: bytes that are not UTF-8, raw control characters, bad escapes, a leading zero
 * or a fraction in the sequence number, CRLF line ends, a second data line, an event name that
 * is not the type, comments, a second `delta` key.
 */

type Json = Record<string, unknown>;

function sorted(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sorted).join(',')}]`;
  if (typeof v === 'object' && v !== null)
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sorted((v as Json)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

const response = (status: string, usage: Json | null): Json => ({
  id: 'resp_upstream',
  object: 'response',
  status,
  output: [],
  usage,
});

/** One frame's bytes: a well-formed event in one of two key orders, or a hostile variant of it. */
const frameArb = (seq: number, typeFirst: boolean) =>
  fc
    .tuple(
      fc.oneof(
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        fc.string({ unit: 'binary', maxLength: 6 }),
        fc.constantFrom('t0 ', '', '"', '\\', '\n', 'Grüße 🌧'),
      ),
      fc.constantFrom(
        'response.output_text.delta',
        'response.function_call_arguments.delta',
        'response.reasoning_summary_text.delta',
      ),
      fc.nat({ max: 14 }),
    )
    .map(([delta, type, hostile]) => {
      const data: Json = {
        content_index: 0,
        delta,
        item_id: 'msg_1',
        logprobs: [],
        output_index: 0,
        sequence_number: seq,
        type,
      };
      let json = typeFirst
        ? JSON.stringify({ type, sequence_number: seq, item_id: 'msg_1', output_index: 0, content_index: 0, delta })
        : sorted(data);
      let head = `event: ${type}\n`;
      let end = '\n\n';
      let bytes: Buffer | null = null;
      switch (hostile) {
        case 1:
          bytes = Buffer.concat([
            Buffer.from(`${head}data: ${json.replace(/"delta":"/, '"delta":"\xff')}`, 'latin1'),
            Buffer.from(end),
          ]);
          break;
        case 2:
          json = json.replace(/"delta":"/, '"delta":"\u0001');
          break;
        case 3:
          json = json.replace(/"delta":"/, '"delta":"\\q');
          break;
        case 4:
          json = json.replace(`"sequence_number":${seq}`, `"sequence_number":0${seq}`);
          break;
        case 5:
          json = json.replace(`"sequence_number":${seq}`, `"sequence_number":${seq}.5`);
          break;
        case 6:
          head = head.replace('\n', '\r\n');
          end = '\r\n\r\n';
          break;
        case 7:
          json = json.replace(',', '\ndata: ,');
          break;
        case 8:
          head = 'event: message\n';
          break;
        case 9:
          head = `: keep-alive\n${head}`;
          break;
        case 10:
          json = json.replace('{', '{"delta":"x",');
          break;
        default:
      }
      return bytes ?? Buffer.from(`${head}data: ${json}${end}`, 'utf8');
    });

/** A whole stream: created, deltas (one key order throughout), maybe completed, maybe an error event. */
const streamArb = fc
  .tuple(fc.boolean(), fc.integer({ min: 0, max: 12 }), fc.constantFrom('completed', 'error', 'cut'))
  .chain(([typeFirst, n, ending]) =>
    fc.tuple(fc.tuple(...Array.from({ length: n }, (_, i) => frameArb(i + 1, typeFirst))), fc.constant(ending)),
  )
  .map(([deltas, ending]) => {
    const frames: Buffer[] = [
      Buffer.from(
        `event: response.created\ndata: ${sorted({ response: response('in_progress', null), sequence_number: 0, type: 'response.created' })}\n\n`,
      ),
      ...deltas,
    ];
    const seq = deltas.length + 1;
    if (ending === 'completed')
      frames.push(
        Buffer.from(
          `event: response.completed\ndata: ${sorted({ response: response('completed', { input_tokens: 2, output_tokens: 3 }), sequence_number: seq, type: 'response.completed' })}\n\n`,
        ),
      );
    else if (ending === 'error')
      frames.push(
        Buffer.from(
          `event: error\ndata: ${sorted({ code: 'x', message: 'boom', sequence_number: seq, type: 'error' })}\n\n`,
        ),
      );
    return Buffer.concat(frames);
  });

function run(stream: Buffer, cuts: number[], fastPath: boolean) {
  return runResponsesRelay(new ResponsesStreamRelay('resp_ours', 4096, undefined, fastPath), stream, cuts);
}

describe('the Responses relay: fast path and slow path', () => {
  it('send the same bytes and end the same way, however the stream is cut', () => {
    fc.assert(
      fc.property(streamArb, fc.array(fc.nat(), { maxLength: 8 }), (stream, cuts) => {
        expect(run(stream, cuts, true)).toEqual(run(stream, cuts, false));
      }),
      { numRuns: 400 },
    );
  });

  it('the fast path takes a stream’s deltas after its first', () => {
    const deltas = Array.from(
      { length: 5 },
      (_, i) =>
        `event: response.output_text.delta\ndata: ${sorted({ content_index: 0, delta: `t${i} `, item_id: 'msg_1', logprobs: [], output_index: 0, sequence_number: i + 1, type: 'response.output_text.delta' })}\n\n`,
    ).join('');
    const relay = new ResponsesStreamRelay('resp_ours', 4096, undefined, true);
    const out = new OutputBatch();
    relay.pushInto(Buffer.from(deltas), out);
    expect(out.take().toString()).toBe(deltas);
    expect(relay.contentChunks).toBe(5);
    // The learned layout is used: our error event takes the sequence number after the last delta's.
    expect(relay.closingError(obError('upstream_unavailable'))).toContain('"sequence_number":6}');
    expect((relay as unknown as { own: unknown }).own).not.toBeNull();
  });
});
