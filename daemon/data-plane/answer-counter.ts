import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type { Metrics } from '../metrics/metrics.js';

const CHAT_PATH = '/v1/chat/completions';

/**
 * Counts every answer of the proxied APIs (chat, Responses, legacy completions, Messages), whoever gave it (the auth hook, validation, the relay,
 * Fastify's own errors), in the metrics. Fastify calls `requestCompleted` when a response of any
 * route finishes, from the same listener that runs a route's onResponse hooks (it sets that
 * listener up for every request when it is given a logger, as the data plane is); an onResponse
 * hook cost three closures and a hook runner per request (docs/performance.md, "What each optimisation bought").
 * Request logging stays off: the base class logs nothing with `disableRequestLogging`.
 */
export class AnswerCounter extends LogController {
  constructor(private readonly metrics: Metrics) {
    super({ disableRequestLogging: true });
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
    metadata?: Record<string, unknown>,
  ): void {
    super.requestCompleted(error, request, reply, metadata);
    const route = isChatRoute(request) ? 0 : otherRoute(request);
    if (route < 0) return;
    const auth = request.auth;
    this.metrics.answered(
      auth?.instance.id ?? '',
      auth?.key.id ?? '',
      reply.statusCode,
      reply.elapsedTime / 1000,
      route,
    );
  }
}

/**
 * Whether the request was the chat route's. A POST to its exact path always is; any other URL
 * (a query, a trailing slash, another route, a 404) asks Fastify which route it was on, which
 * builds an object, so the common case does not.
 */
function isChatRoute(request: FastifyRequest): boolean {
  const raw = request.raw;
  if (raw.method === 'POST' && raw.url === CHAT_PATH) return true;
  if (request.is404) return false;
  const route = request.routeOptions;
  return route.method === 'POST' && route.url === CHAT_PATH;
}

/** The other APIs' paths, by their place in ROUTES (metrics.ts). */
const OTHER_ROUTES = new Map([
  ['/v1/responses', 1],
  ['/v1/completions', 2],
  ['/v1/messages', 3],
  ['/api/chat', 4],
  ['/api/generate', 5],
  ['/api/embed', 6],
]);

/** The place in ROUTES of an API other than chat that the request was on, or -1. */
function otherRoute(request: FastifyRequest): number {
  const raw = request.raw;
  if (raw.method === 'POST') {
    const exact = OTHER_ROUTES.get(raw.url ?? '');
    if (exact !== undefined) return exact;
  }
  if (request.is404) return -1;
  const route = request.routeOptions;
  return route.method === 'POST' ? (OTHER_ROUTES.get(route.url ?? '') ?? -1) : -1;
}
