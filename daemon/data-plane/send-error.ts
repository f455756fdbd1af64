import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';

export function toObError(err: unknown): ObProxyError {
  return err instanceof ObProxyError ? err : obError('internal_error', { cause: err });
}

export function replyError(reply: FastifyReply, err: ObProxyError, headers: Record<string, string> = {}): FastifyReply {
  return reply.code(err.status).headers(headers).type('application/json').send(err.toBody());
}

/** For hijacked responses: the same envelope written straight to the socket. */
export function writeRawError(res: ServerResponse, err: ObProxyError, requestId: string): void {
  if (res.headersSent) return;
  const body = JSON.stringify(err.toBody());
  res.writeHead(err.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-request-id': requestId,
  });
  res.end(body);
}

/**
 * For what Node's HTTP server meets before there is a response object (a broken request, a
 * CONNECT): the envelope written on the socket itself, then the connection closed, since what
 * follows on it cannot be trusted to be the next request.
 */
export function writeSocketError(socket: Duplex, err: ObProxyError): void {
  if (socket.writable) {
    const body = JSON.stringify(err.toBody());
    socket.write(`HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}
