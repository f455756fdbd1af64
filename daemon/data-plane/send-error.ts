import type { ServerResponse } from 'node:http';
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
