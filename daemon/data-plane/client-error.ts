import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError } from 'fastify';
import { type ObProxyError, obError } from '../../src/errors.js';
import { writeSocketError } from './send-error.js';

function errorFor(code: string | undefined): ObProxyError {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return obError('request_timeout');
  if (code === 'HPE_HEADER_OVERFLOW') return obError('headers_too_large');
  return obError('malformed_http');
}

/**
 * Errors Node's HTTP parser meets before Fastify sees a request (malformed request line or
 * headers, headers too large, a client too slow to send its request). Fastify's default answers
 * these in its own shape; SDKs parse only the OpenAI envelope, so answer in that, then close.
 * When a response has begun on this connection (bytes sent after a request, while its stream is
 * being answered), a status line written now would land inside that response's body: the
 * connection is only closed, as Node's own handler does.
 */
export function clientErrorHandler(err: ConnectionError, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // Node's own name for the response in progress on a socket; its default handler reads it too.
  const current = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (current?.headersSent === true) {
    socket.destroy();
    return;
  }
  writeSocketError(socket, errorFor(err.code));
}
