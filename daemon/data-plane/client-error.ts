import type { Socket } from 'node:net';
import type { ConnectionError } from 'fastify';
import { type ObProxyError, obError } from '../../src/errors.js';

function errorFor(code: string | undefined): ObProxyError {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return obError('request_timeout');
  if (code === 'HPE_HEADER_OVERFLOW') return obError('headers_too_large');
  return obError('malformed_http');
}

/**
 * Errors Node's HTTP parser meets before Fastify sees a request (malformed request line or
 * headers, headers too large, a client too slow to send its request). Fastify's default answers
 * these in its own shape; SDKs parse only the OpenAI envelope, so answer in that, then close.
 */
export function clientErrorHandler(err: ConnectionError, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const e = errorFor(err.code);
    const body = JSON.stringify(e.toBody());
    socket.write(`HTTP/1.1 ${e.status} ${e.status === 408 ? 'Request Timeout' : e.status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}
