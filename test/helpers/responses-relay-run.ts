import { obError } from '../../src/errors.js';
import { OutputBatch } from '../../src/wire/output-batch.js';
import type { ResponsesStreamRelay } from '../../src/apis/responses/event-relay.js';

/**
 * `stream` pushed through `relay` in reads cut at `cuts` (taken modulo its length, in order),
 * and all the relay made of it: the bytes sent and how it ended. Two relays that must behave
 * alike (fast path and parsed path) are compared on this.
 */
export function runResponsesRelay(relay: ResponsesStreamRelay, stream: Buffer, cuts: readonly number[]) {
  const out = new OutputBatch();
  let at = 0;
  for (const c of [...cuts.map((x) => x % (stream.length + 1)).sort((a, b) => a - b), stream.length]) {
    if (c < at) continue;
    relay.pushInto(stream.subarray(at, c), out);
    at = c;
  }
  return {
    bytes: out.length === 0 ? '' : out.take().toString('latin1'),
    done: relay.done,
    sawError: relay.sawError,
    invalid: relay.invalid,
    reason: relay.invalidReason,
    contentChunks: relay.contentChunks,
    counts: relay.counts(),
    closing: relay.closingError(obError('upstream_unavailable')),
  };
}
