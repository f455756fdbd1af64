import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';
import type { HeaderList } from '../../src/services/key-limiter.js';
import type { UsageLog } from '../usage-log.js';
import { errorBodyFor } from './error-shape.js';
import { closeIfBodyPending } from './unread-body.js';

/** The span a refusal gets with tracing on (daemon/tracing/tracer.ts). */
interface RefusalTracing {
  refused(reply: FastifyReply, err: ObProxyError, key: string | undefined, instance: string | undefined): void;
}

/** Whose request was refused, when the request itself does not say yet (no `auth` on it). */
export interface RefusedWho {
  key?: string | undefined;
  instance?: string | undefined;
  /** More for the log line alone (never the client's answer). */
  logged?: Record<string, unknown>;
}

export function toObError(err: unknown): ObProxyError {
  return err instanceof ObProxyError ? err : obError('internal_error', { cause: err });
}

/**
 * Answers `err` in the OpenAI envelope (or the route's own, error-shape.ts), and says so in the log: which route (its pattern, never
 * the raw URL, where a client may have put a secret), the code, and the key's id when known.
 * With tracing on, the data plane's refusal gets its span (`tracing`, decorated on it alone).
 */
export function replyError(
  reply: FastifyReply,
  err: ObProxyError,
  headers: Record<string, string> = {},
  who?: RefusedWho,
): FastifyReply {
  const request = reply.request;
  const auth = (request as { auth?: { key: { id: string }; instance: { id: string } } | null }).auth;
  const key = who?.key ?? auth?.key.id;
  const logged = who?.logged;
  const server = reply.server as { tracing?: RefusalTracing | null; usageLog?: UsageLog | null };
  if (server.tracing != null) server.tracing.refused(reply, err, key, who?.instance ?? auth?.instance.id);
  if (server.usageLog != null && key !== undefined) logRefusal(server.usageLog, reply, err, key, who?.instance);
  // A blocked guesser's 429s are counted (metrics), not logged one by one: the limiter logs the block.
  if (err.code !== 'rate_limited')
    reply.log.info(
      {
        reqId: request.id,
        route: `${request.method} ${request.routeOptions.url ?? '(no route)'}`,
        status: err.status,
        code: err.wireCode,
        ...(key === undefined ? {} : { key }),
        ...logged,
      },
      'refused',
    );
  return reply
    .code(err.status)
    .headers(withRetryAdvice(headers, err))
    .type('application/json')
    .send(errorBodyFor(reply.raw, err));
}

/** A refusal's usage line (--usage-log), for a request whose key is known. */
function logRefusal(log: UsageLog, reply: FastifyReply, err: ObProxyError, key: string, instanceId?: string): void {
  const request = reply.request;
  const auth = (request as { auth?: { instance: { id: string } } | null }).auth;
  log.refused({
    id: request.id,
    key,
    instance: instanceId ?? auth?.instance.id ?? null,
    route: request.routeOptions.url ?? request.url.split('?')[0]!,
    status: err.status,
    code: err.wireCode,
    ms: Math.round(reply.elapsedTime),
  });
}

/** `headers` with the error's `x-should-retry`, and a Retry-After wherever it says to retry. */
function withRetryAdvice(headers: Record<string, string>, err: ObProxyError): Record<string, string> {
  if (err.retry === null) return headers;
  // Retry-After 0 beside it: a client that reads no x-should-retry (Codex) then fails in a
  // moment instead of backing off for seconds before its last try.
  if (!err.retry) return { 'retry-after': '0', ...headers, 'x-should-retry': 'false' };
  return { 'retry-after': '1', ...headers, 'x-should-retry': 'true' };
}

/** The same advice as a header list (writeHead's). */
function retryAdviceList(extra: HeaderList | null, err: ObProxyError): HeaderList | null {
  if (err.retry === null) return extra;
  const list = extra === null ? [] : [...extra];
  if (!hasHeader(list, 'retry-after')) list.push('retry-after', err.retry ? '1' : '0');
  list.push('x-should-retry', err.retry ? 'true' : 'false');
  return list;
}

function hasHeader(list: HeaderList, name: string): boolean {
  for (let i = 0; i < list.length; i += 2) if (String(list[i]).toLowerCase() === name) return true;
  return false;
}

/** For hijacked responses: the same envelope (the route's shape, error-shape.ts) written straight to the socket, with `extra` headers (the key's x-ratelimit-*). */
export function writeRawError(
  res: ServerResponse,
  err: ObProxyError,
  requestId: string,
  extra: HeaderList | null = null,
): void {
  if (res.headersSent) return;
  closeIfBodyPending(res);
  const body = JSON.stringify(errorBodyFor(res, err));
  res.writeHead(err.status, jsonHeaders(Buffer.byteLength(body), requestId, retryAdviceList(extra, err)));
  res.end(body);
}

/*
 * The headers of an answer we write ourselves, with `extra` (the key's x-ratelimit-*) in the same
 * list: one writeHead takes them all (see admitKey for why not setHeader). Names and values in
 * turn, in one array, which Node's header loop reads by index. An object made by spreading the
 * key's headers into ours cost a limited key about 10 µs a request in some processes: V8 kept
 * defining and migrating the objects' maps (DefineNamedOwnIC, MigrateToMap; docs/performance.md,
 * "What each optimisation bought"), and Node read their properties by name, megamorphic keyed loads.
 */

/** A JSON body's. */
export function jsonHeaders(
  length: number,
  requestId: string,
  extra: HeaderList | null | undefined,
): (string | number)[] {
  return extra == null || extra.length === 0
    ? ['content-type', 'application/json', 'content-length', length, 'x-request-id', requestId]
    : [...extra, 'content-type', 'application/json', 'content-length', length, 'x-request-id', requestId];
}

const STREAM_TYPE = 'text/event-stream; charset=utf-8';

/** An event stream's. */
export function streamHeaders(requestId: string, extra: HeaderList | null | undefined): string[] {
  return extra == null || extra.length === 0
    ? ['content-type', STREAM_TYPE, 'cache-control', 'no-cache', 'x-accel-buffering', 'no', 'x-request-id', requestId]
    : [
        ...extra,
        'content-type',
        STREAM_TYPE,
        'cache-control',
        'no-cache',
        'x-accel-buffering',
        'no',
        'x-request-id',
        requestId,
      ];
}

/**
 * For what Node's HTTP server meets before there is a response object (a broken request, a
 * CONNECT): the envelope written on the socket itself, then the connection closed, since what
 * follows on it cannot be trusted to be the next request.
 */
export function writeSocketError(socket: Duplex, err: ObProxyError): void {
  if (socket.writable) {
    const body = JSON.stringify(err.toBody());
    socket.write(
      `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        (err.retry === null ? '' : `x-should-retry: ${String(err.retry)}\r\n`) +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
