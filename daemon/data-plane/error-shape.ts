import type { ServerResponse } from 'node:http';
import type { ObProxyError } from '../../src/errors.js';

/**
 * The responses whose errors take Anthropic's shape, `{"type":"error","error":{"type","message"}}`
 * (the Messages API, docs/contract.md §6), rather than OpenAI's envelope: the clients of that API
 * parse only their own. Marked when the route is known, before any check, so every refusal on
 * it (the key's, the body's, the limits', the model server's) is answered so. A WeakSet, not a
 * property on the response: the other routes' responses keep their shape, and only errors look.
 */
const ANTHROPIC = new WeakSet<ServerResponse>();

export function answerErrorsAsAnthropic(res: ServerResponse): void {
  ANTHROPIC.add(res);
}

/** The error's body for this response, in its API's shape. */
export function errorBodyFor(res: ServerResponse, err: ObProxyError): object {
  return ANTHROPIC.has(res) ? err.toAnthropicBody() : err.toBody();
}
