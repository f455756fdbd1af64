import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Instance } from '../../src/domain/instance.js';
import { obError } from '../../src/errors.js';
import { requestId } from '../../src/ids.js';
import { clipped } from '../../src/printable.js';
import type { DaemonContext } from '../context.js';
import type { TlsFiles } from '../tls.js';
import { AnswerCounter } from './answer-counter.js';
import { registerCors } from './cors.js';
import { makeAuthHook } from './auth-hook.js';
import { makeChatHandler } from './chat-completions.js';
import { makeResponsesHandler, refuseCompaction, responsesApi } from './responses.js';
import { isResponsesUpgrade, serveResponsesSockets } from './socket-upgrade.js';
import { makeCompletionsHandler } from './completions.js';
import { anthropicErrors, makeCountTokensHandler, makeMessagesHandler } from './messages.js';
import { registerOllamaRoutes } from './ollama.js';
import { clientErrorHandler } from './client-error.js';
import { answerIfKeyLapsed } from './key-standing.js';
import { connectionCaps, descriptorLimit, limitConnections, servePipelinedInOrder } from './connection-limits.js';
import { answerNodeRefusals } from './before-fastify-refusals.js';

import { replyError, toObError } from './send-error.js';
import { closeIfBodyPending } from './unread-body.js';
import { answerBodyRefusal, makeBodyReader } from './body-reader.js';

import { packState } from './pack-headers.js';
import { DATA_PLANE_ROUTES, servedList } from './routes.js';

/**
 * The public listener: POST /v1/chat/completions, GET /v1/models, GET /healthz, and nothing
 * else. Management lives on another Fastify instance bound to the Unix socket, so no route
 * registered there can ever be reached from this port.
 */
/**
 * With TLS, Fastify builds the server from `https` alone: the same limits go there too. Typed as
 * a plain object: an https.Server is used here exactly as the http.Server that Fastify's types
 * expect everywhere else (same requests, same connection methods).
 */
function httpsOption(tls: TlsFiles | null, http: { headersTimeout: number }): object {
  // A handshake never finished is bounded like headers never finished: Node's default held it
  // 120 s, twice the header limit, and held its connection (and descriptor) all that time.
  const handshakeTimeout = http.headersTimeout;
  return tls === null ? {} : { https: { ...http, handshakeTimeout, cert: tls.cert, key: tls.key } };
}

/** What the not-found answer names: the client APIs' routes a client asks (not the WebSocket, the refused compaction, Ollama's, the probes). */
const SERVED = servedList(
  DATA_PLANE_ROUTES.filter(
    (r) =>
      (r.family === 'openai' || r.family === 'anthropic') &&
      !(r.method === 'GET' && r.path === '/v1/responses') &&
      r.path !== '/v1/responses/compact',
  ),
);

export function buildDataPlane(ctx: DaemonContext, tls: TlsFiles | null = null): FastifyInstance {
  // Fastify gives each request a child logger. A pino child cost 2% of the proxy's CPU, and a
  // custom childLoggerFactory is validated on every request; every line the data plane writes
  // names its request id itself, so the request's logger is this one, whose child is itself.
  const log = Object.create(ctx.log) as FastifyBaseLogger;
  log.child = () => log;
  const http = {
    requestTimeout: ctx.config.requestTimeoutMs,
    headersTimeout: Math.min(60_000, ctx.config.requestTimeoutMs),
    connectionsCheckingInterval: Math.min(1_000, Math.max(100, Math.floor(ctx.config.requestTimeoutMs / 4))),
    // Node answers a missing Host with a bare 400; answerNodeRefusals answers it in our shape.
    requireHostHeader: false,
    // The one upgrade served: every other (curl's h2c) is a plain request, as before (socket-upgrade.ts).
    shouldUpgradeCallback: isResponsesUpgrade,
  };
  const app = Fastify({
    loggerInstance: log,
    // With metrics on, every answer to a chat completion is counted as its response finishes.
    logController:
      ctx.metrics === null ? new LogController({ disableRequestLogging: true }) : new AnswerCounter(ctx.metrics),
    bodyLimit: ctx.config.bodyLimit,
    genReqId: () => requestId(),
    requestIdHeader: false,
    // A client that trickles its request is cut off (408); responses are not bounded by this.
    // Node reads requestTimeout when the server is created, so it goes in `http`: Fastify's own
    // requestTimeout option is set afterwards and never took effect. Node enforces both limits
    // only when its interval check runs (default every 30 s, so a 60 s limit held a socket up to
    // 90 s): run it every second at most. It walks only connections with a request still
    // arriving, in C++, so a second is cheap.
    requestTimeout: ctx.config.requestTimeoutMs,
    http,
    ...httpsOption(tls, http),
    clientErrorHandler,
    // Router refusals (broken percent-encoding and the like) in the OpenAI shape too.
    frameworkErrors: (_error, _request, reply) => {
      replyError(reply, obError('invalid_request', { message: 'The request URL is not valid.' }));
    },
    keepAliveTimeout: 65_000,
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: true },
  });
  // Counted from the first connection on: one past a cap is closed as it arrives, unread.
  limitConnections(app.server, connectionCaps(ctx.config, descriptorLimit()), log);
  servePipelinedInOrder(app.server);
  // Read by replyError, which the management plane shares: there it is undefined.
  app.decorate('tracing', ctx.tracing);
  app.decorate('usageLog', ctx.usageLog);
  app.decorateRequest('auth', null);
  app.decorateRequest('rateLimit', null);
  app.decorateRequest('heldBody', null);
  answerNodeRefusals(app);
  registerCors(app, ctx.config.corsOrigins);

  // Read every body as bytes: the handler parses once, reports invalid_json before a bad
  // Content-Type (docs/contract.md §3 order), and forwards the same bytes when nothing needs rewriting.
  // Each body is read into one buffer of its announced length, and held in the byte budget as it
  // arrives when it has none (body-reader.ts, `makeBodyReader`). application/json is named as well
  // as '*': Fastify caches a parser found by the header's name, but finds the catch-all only
  // after parsing the header anew (a ContentType, two regular expressions and a join) on every
  // request.
  app.removeAllContentTypeParsers();
  const readBody = makeBodyReader(ctx);
  app.addContentTypeParser('application/json', readBody);
  app.addContentTypeParser('*', readBody);

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // Every answer Fastify writes, wherever it was decided: a refusal made on the headers alone
    // must not keep a connection whose body is still to come (unread-body.ts).
    closeIfBodyPending(reply.raw);
    // The key's x-ratelimit-* (admitKey) on every answer Fastify sends; the relay adds them to its own.
    const h = request.rateLimit;
    if (h !== null) for (let i = 0; i < h.length; i += 2) reply.header(h[i] as string, h[i + 1]);
  });

  // Checks 3 to 5 run again at the start of the handler, once the body is in (recheck).
  app.post('/v1/chat/completions', { onRequest: makeAuthHook(ctx, true) }, makeChatHandler(ctx));
  const responses = responsesApi(ctx);
  app.post('/v1/responses', { onRequest: makeAuthHook(ctx, true) }, makeResponsesHandler(ctx, responses));
  serveResponsesSockets(app, ctx, responses);
  app.post('/v1/responses/compact', refuseCompaction);
  app.post('/v1/completions', { onRequest: makeAuthHook(ctx, true) }, makeCompletionsHandler(ctx));
  app.post('/v1/messages', { onRequest: [anthropicErrors, makeAuthHook(ctx, true, true)] }, makeMessagesHandler(ctx));
  app.post(
    '/v1/messages/count_tokens',
    { onRequest: [anthropicErrors, makeAuthHook(ctx, true, true)] },
    makeCountTokensHandler(ctx),
  );
  // Ollama's own API under /api, for its own clients (ollama.ts).
  registerOllamaRoutes(app, ctx);

  // The key's one model, whatever the instance's state (OpenAI's list and model shapes), with
  // its pack's end and whether it is near when it has one (docs/contract.md §3.8).
  const modelOf = (inst: Instance) => {
    const model = {
      id: inst.model,
      object: 'model',
      created: Math.floor(Date.parse(inst.createdAt) / 1000),
      owned_by: 'ob-proxy',
    };
    const pack = packState(inst, ctx.clock.now(), ctx.config.packWarningMs);
    return pack === null ? model : { ...model, pack_ends_at: pack.at, pack_ends_soon: pack.soon };
  };
  app.get('/v1/models', { onRequest: makeAuthHook(ctx, false) }, async (request) => {
    const inst = request.auth?.instance;
    if (inst === undefined) throw obError('internal_error');
    return { object: 'list', data: [modelOf(inst)] };
  });
  app.get<{ Params: { model: string } }>(
    '/v1/models/:model',
    { onRequest: makeAuthHook(ctx, false) },
    async (request, reply) => {
      const inst = request.auth?.instance;
      if (inst === undefined) throw obError('internal_error');
      if (request.params.model !== inst.model && !inst.aliases.includes(request.params.model)) {
        return replyError(
          reply,
          obError('model_not_found', {
            param: 'model',
            message: `This API key serves only "${inst.model}"; there is no model "${clipped(request.params.model)}" for it.`,
          }),
        );
      }
      return modelOf(inst);
    },
  );

  // Liveness, for a probe and for the agents' own connectivity checks before their first request
  // (Claude Code's HEAD /api/hello, others' HEAD /): answered here, with no key, and no refusal.
  const alive = async (_request: FastifyRequest, reply: FastifyReply) => {
    if (ctx.draining) return reply.code(503).send({ status: 'draining' });
    return { status: 'ok' };
  };
  app.get('/healthz', alive);
  app.get('/api/hello', alive);
  app.get('/', alive);

  // For a load balancer: 503 while draining, or while out of sync with a shared store for longer
  // than --max-stale (every key would be refused), so traffic goes to the other daemons.
  app.get('/readyz', async (_request, reply) => {
    if (ctx.draining) return reply.code(503).send({ status: 'draining' });
    if (ctx.storeStale)
      return reply.code(503).header('retry-after', '5').send({ status: 'store_unreachable', store: ctx.storeLocation });
    return { status: 'ready' };
  });

  app.setNotFoundHandler((request, reply) => {
    const hint =
      request.url.startsWith('/chat/completions') ||
      request.url.startsWith('/responses') ||
      request.url.startsWith('/completions') ||
      request.url.startsWith('/messages') ||
      request.url.startsWith('/models')
        ? ' Your base URL is missing /v1: use {base_url}/v1.'
        : '';
    replyError(
      reply,
      obError('route_not_found', {
        message: `No route ${request.method} ${request.url.split('?')[0]}. The proxy serves ${SERVED}.${hint}`,
      }),
    );
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    // A chunked body past the byte budget, refused as it arrived (body-reader.ts).
    if (answerBodyRefusal(reply, error)) return reply;
    // A body refused (too large, bad length) after its key was revoked: checks 2 to 5 come
    // first. Closed like a 413: the rest of that body is not worth reading.
    if (
      error.code?.startsWith('FST_ERR_CTP_') === true &&
      answerIfKeyLapsed(ctx, request, reply, { connection: 'close' })
    )
      return reply;
    switch (error.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return replyError(
          reply,
          obError('payload_too_large', {
            message: `The request body is larger than the proxy accepts (${ctx.config.bodyLimit} bytes). Shorten the conversation or ask the operator to raise --body-limit.`,
          }),
          { connection: 'close' },
        );
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return replyError(
          reply,
          obError('invalid_request', { message: 'The Content-Length header does not match the body.' }),
        );
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return replyError(
          reply,
          obError('invalid_json', { message: 'The request body is empty. Send a JSON chat completion request.' }),
        );
      default:
        break;
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      return replyError(reply, obError('invalid_request', { message: `The request is malformed: ${error.message}` }));
    }
    const e = toObError(error);
    request.log.error({ err: error, reqId: request.id }, 'unhandled error');
    return replyError(reply, e);
  });

  return app;
}
