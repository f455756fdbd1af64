import type { RequestOutcome } from '../../src/services/usage.js';

/**
 * Where a relay reports the end of its exchange, once. `prompt` null: the model server had the
 * prompt (it answered 200, or the client left while it had it) but no prompt count came back; an
 * estimate is charged (prompt-estimate.ts). `completion` null: no completion count came back;
 * `counted` is what the relay saw instead (a stream's content events, else 0).
 */
export interface ExchangeSink {
  ended(
    prompt: number | null,
    completion: number | null,
    counted: number,
    reasoning: number,
    outcome: RequestOutcome,
  ): void;
}
