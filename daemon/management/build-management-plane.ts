import Fastify, { LogController, type FastifyError, type FastifyInstance } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';
import { clipped } from '../../src/printable.js';
import type { DaemonContext } from '../context.js';
import { replyError } from '../data-plane/send-error.js';
import { daemonsOf, registerDaemonRoutes } from './daemons.js';
import { registerEventRoutes } from './events.js';
import { registerInstanceRoutes } from './instances.js';
import { registerKeyRoutes } from './keys.js';
import { registerModelRoutes } from './models.js';
import { schemaError } from './schemas.js';
import { registerUsageRoutes } from './usage.js';
import { registerStatsRoutes } from './stats.js';

/**
 * The management API, served only on the Unix socket (mode 0600): whoever can open the socket
 * is an operator. The CLI and the console are its only clients.
 */
export function buildManagementPlane(ctx: DaemonContext): FastifyInstance {
  const app = Fastify({
    loggerInstance: ctx.log,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 1024 * 1024,
    // The routes' schemas check what was sent as sent: no coercion of 42 into "42", no field dropped.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false } },
    schemaErrorFormatter: schemaError,
    // Router refusals (an id too long for it, broken percent-encoding) in our envelope, with a
    // sentence the CLI can print, instead of Fastify's own 414/400 bodies.
    frameworkErrors: (error, _request, reply) => {
      replyError(
        reply,
        obError('invalid_argument', {
          message:
            error.code === 'FST_ERR_MAX_PARAM_LENGTH'
              ? 'An id in the path is too long: instance ids are at most 64 characters.'
              : 'The request path is not valid percent-encoding.',
        }),
      );
    },
  });

  // Every change an operator makes, and its result, is a line in the log (refusals are logged by
  // replyError): what, on which instance or key, with which outcome.
  app.addHook('onResponse', (request, reply, done) => {
    if (request.method !== 'GET' && reply.statusCode < 400) {
      const params = request.params as Record<string, string> | undefined;
      const body = request.body as Record<string, unknown> | undefined;
      const instance = typeof body?.instance === 'string' ? body.instance : undefined;
      const id = typeof body?.id === 'string' ? body.id : undefined;
      request.log.info(
        {
          action: `${request.method} ${request.routeOptions.url ?? ''}`,
          ...(id === undefined ? {} : { id }),
          ...params,
          ...(instance === undefined ? {} : { instance }),
          status: reply.statusCode,
        },
        'management action',
      );
    }
    done();
  });

  app.get('/v1/status', async () => ({
    version: ctx.version,
    pid: process.pid,
    baseUrl: ctx.baseUrl,
    store: ctx.storeLocation,
    socket: ctx.config.socket,
    startedAt: ctx.startedAt,
    models: [...ctx.lifecycle.models],
    storeSync: ctx.storeSync(),
    daemons: await daemonsOf(ctx),
  }));
  // `ob-proxy store backup`: the state as this daemon holds it, taken under the lifecycle's
  // mutex; the CLI writes the file (as the operator, where the operator chose).
  app.get('/v1/store/backup', async () => ({ store: ctx.storeLocation, data: await ctx.lifecycle.snapshot() }));
  registerInstanceRoutes(app, ctx);
  registerKeyRoutes(app, ctx);
  registerModelRoutes(app, ctx);
  registerUsageRoutes(app, ctx);
  registerStatsRoutes(app, ctx);
  registerEventRoutes(app, ctx);
  registerDaemonRoutes(app, ctx);

  app.setNotFoundHandler((request, reply) => {
    replyError(
      reply,
      obError('invalid_argument', {
        status: 404,
        message: `No management route ${request.method} ${clipped(request.url)}. Is the CLI newer than the daemon?`,
      }),
    );
  });
  app.setErrorHandler((error: FastifyError | ObProxyError, request, reply) => {
    if (error instanceof ObProxyError) return replyError(reply, error);
    if (error.statusCode !== undefined && error.statusCode < 500) {
      return replyError(reply, obError('invalid_argument', { message: error.message }));
    }
    request.log.error({ err: error }, 'management error');
    return replyError(reply, obError('internal_error'));
  });
  return app;
}
