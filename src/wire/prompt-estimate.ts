import type { Media } from './media.js';
import { MAX_EXCHANGE_TOKENS } from './chat-response.js';

/**
 * Tokens charged for a prompt the model server had but never counted for us.
 *
 * The model server reports a prompt's tokens only at the end of its answer (the usage of a plain
 * answer, the last chunk of a stream). A client that left before then, or an answer that broke
 * off, had its prompt counted as 0: a key could send a long prompt, read the first token and hang
 * up, again and again, and the GPU's prefill cost it nothing against its tpm or in its usage. Such
 * a prompt is charged an estimate instead: OpenAI's rule of thumb of about four characters of text
 * per token, over the request as it was sent (its JSON syntax standing in for the chat template's
 * tokens), with each image, audio or file part counted as MEDIA_TOKENS instead of by its encoded
 * size (a 1 MiB data URL is not 260,000 tokens).
 */

/** Tokens per image, audio or file part: what gemma's vision encoder makes of one image. */
export const MEDIA_TOKENS = 256;
const CHARS_PER_TOKEN = 4;

/** `bodyLength`: the length of the body sent upstream (bytes, or characters when it was rewritten). */
export function estimatePromptTokens(bodyLength: number, media: Media): number {
  const text = Math.max(0, bodyLength - media.chars);
  return Math.max(1, Math.ceil(text / CHARS_PER_TOKEN) + media.parts * MEDIA_TOKENS);
}

/**
 * A plain answer whose client left: the model server had been writing it, but sends nothing until
 * it is done, so what it wrote is never reported. Charged as the instance's recent pace (completion
 * tokens per millisecond with the model server, learned by `learnPace`) times how long this request
 * was with it; 0 before any answer has been seen. Streams need none: their content events are counted.
 * Never past the request's own cap (`max_tokens`), nor MAX_EXCHANGE_TOKENS: a model server that
 * reported 100,000,000 tokens in a moment must not charge a later key billions.
 */
export function estimateCompletionTokens(tokensPerMs: number, elapsedMs: number, cap: number | null): number {
  if (!(elapsedMs > 0)) return 0;
  return Math.min(Math.floor(tokensPerMs * elapsedMs), cap ?? MAX_EXCHANGE_TOKENS, MAX_EXCHANGE_TOKENS);
}

/** Answers shorter than this say little about the pace (a cached prompt, a one-token reply). */
const MIN_PACE_MS = 50;
/** Each answer moves the pace a fifth of the way: a few answers follow a change of model or load. */
const PACE_WEIGHT = 0.2;

/** The instance's pace after an answer of `tokens` completion tokens that took `elapsedMs`. */
export function learnPace(pace: number, tokens: number, elapsedMs: number): number {
  if (tokens <= 0 || elapsedMs < MIN_PACE_MS) return pace;
  const sample = tokens / elapsedMs;
  return pace === 0 ? sample : pace + (sample - pace) * PACE_WEIGHT;
}
