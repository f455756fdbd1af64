import { ObProxyError, obError } from '../errors.js';
import { redactToken } from '../wire/upstream-token-redaction.js';

/** undici and socket failures, translated once into our codes (docs/contract.md §3). */
export function translateUpstreamError(err: unknown): ObProxyError {
  if (err instanceof ObProxyError) return err;
  const code = (err as { code?: string } | null)?.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return obError('upstream_timeout', { cause: err });
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return obError('upstream_unavailable', {
      message: 'The model server did not accept a connection in time. Check that the instance is up.',
      cause: err,
    });
  }
  if (code === 'ECONNREFUSED') {
    return obError('upstream_unavailable', {
      message: 'The model server refused the connection. Check that the instance is up and its endpoint is right.',
      cause: err,
    });
  }
  // It answered, but not in HTTP a client can be given: its fault, not the network's.
  const malformed =
    code === 'UND_ERR_HEADERS_OVERFLOW'
      ? 'headers over 16 KiB'
      : (err as Error | null)?.name === 'HTTPParserError'
        ? 'not valid HTTP/1.1'
        : null;
  if (malformed !== null) {
    return obError('upstream_error', {
      message: `The model server sent a malformed HTTP response (${malformed}); it was not relayed. Check the instance's endpoint.`,
      cause: err,
    });
  }
  return obError('upstream_unavailable', { cause: err });
}

interface UpstreamErrorEnvelope {
  error?: unknown;
  detail?: unknown;
}

/**
 * An error status from the model server, in our envelope: same status, its message, and its code
 * when that is a string (vLLM sends integers, Ollama null). `token`, the instance's upstream
 * token, is cleared from both: a server that echoes the request's Authorization header in its
 * error gave it to the client.
 */
export function upstreamStatusError(
  status: number,
  contentType: string | undefined,
  bodyText: string,
  token?: string,
): ObProxyError {
  let message: string | undefined;
  let wireCode = 'upstream_error';
  if (contentType?.includes('json') === true) {
    try {
      const parsed = JSON.parse(bodyText) as UpstreamErrorEnvelope;
      const e = parsed.error;
      if (typeof e === 'string') message = e;
      else if (typeof e === 'object' && e !== null) {
        const m = (e as { message?: unknown }).message;
        if (typeof m === 'string') message = m;
        const c = (e as { code?: unknown }).code;
        if (typeof c === 'string' && c !== '') wireCode = c;
        // Anthropic's envelope, `{"type":"error","error":{"type","message"}}`: its type is its code.
        const t = (e as { type?: unknown }).type;
        if (c === undefined && (parsed as { type?: unknown }).type === 'error' && typeof t === 'string' && t !== '')
          wireCode = t;
      } else if (typeof parsed.detail === 'string') message = parsed.detail;
    } catch {
      // not JSON after all: fall through to the generic sentence
    }
  }
  const text =
    message ??
    (bodyText.trim() === '' || contentType?.includes('html') === true
      ? `The model server answered HTTP ${status} without an error message.`
      : // Cleared before the cut, which could leave part of the token behind.
        redactToken(bodyText.trim(), token).slice(0, 500));
  return obError('upstream_error', {
    status,
    wireCode: redactToken(wireCode, token),
    message: `Model server error (HTTP ${status}): ${redactToken(text, token)}`,
  });
}
