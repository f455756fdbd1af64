import type { ServerResponse } from 'node:http';
import type { ObProxyError } from '../../src/errors.js';

/**
 * The responses whose errors take another API's shape than OpenAI's envelope: Anthropic's
 * `{"type":"error","error":{"type","message"}}` (the Messages API, docs/contract.md §6) or
 * Ollama's `{"error":"…"}` (its native API under /api): the clients of those APIs parse only their
 * own. Marked when the route is known, before any check, so every refusal on it (the key's, the
 * body's, the limits', the model server's) is answered so. A WeakMap, not a property on the
 * response: the other routes' responses keep their shape, and only errors look.
 */
const SHAPES = new WeakMap<ServerResponse, (err: ObProxyError) => object>();

const anthropic = (err: ObProxyError): object => err.toAnthropicBody();
const ollama = (err: ObProxyError): object => err.toOllamaBody();

export function answerErrorsAsAnthropic(res: ServerResponse): void {
  SHAPES.set(res, anthropic);
}

export function answerErrorsAsOllama(res: ServerResponse): void {
  SHAPES.set(res, ollama);
}

/** The error's body for this response, in its API's shape. */
export function errorBodyFor(res: ServerResponse, err: ObProxyError): object {
  const shape = SHAPES.get(res);
  return shape === undefined ? err.toBody() : shape(err);
}
