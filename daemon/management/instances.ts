import type { FastifyInstance } from 'fastify';
import { INSTANCE_STATES } from '../../src/domain/instance.js';
import { ObProxyError, obError } from '../../src/errors.js';
import type { ReadyView } from '../../src/wire/views.js';
import type { DaemonContext } from '../context.js';
import { readToken } from '../upstream-tokens.js';
import { str, viewInstance } from './views.js';

type Body = Record<string, unknown> | undefined;
type Params = { id: string };

export function registerInstanceRoutes(app: FastifyInstance, ctx: DaemonContext): void {
  const lc = ctx.lifecycle;

  app.get<{ Querystring: { state?: string } }>('/v1/instances', async (request) => {
    const state = request.query.state;
    if (state !== undefined && !(INSTANCE_STATES as readonly string[]).includes(state)) {
      throw obError('invalid_argument', { param: 'state', message: `--state must be one of ${INSTANCE_STATES.join(', ')}.` });
    }
    return [...lc.registry.instances.values()]
      .filter((i) => state === undefined || i.state === state)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
      .map((i) => viewInstance(ctx, i));
  });

  app.get<{ Params: Params }>('/v1/instances/:id', async (request) => viewInstance(ctx, lc.getInstance(request.params.id)));

  app.post<{ Body: Body }>('/v1/instances', async (request, reply) => {
    const b = request.body ?? {};
    if (typeof b.upstreamTokenFile === 'string') await readToken(b.upstreamTokenFile);
    const inst = await lc.addInstance({ id: b.id, model: b.model, endpoint: b.endpoint, packEndsAt: b.packEndsAt, upstreamTokenFile: b.upstreamTokenFile });
    await ctx.upstreamTokens.load(inst);
    ctx.packTimerChanged();
    return reply.code(201).send(viewInstance(ctx, inst));
  });

  app.post<{ Params: Params; Body: Body }>('/v1/instances/:id/ready', async (request) => {
    const b = request.body ?? {};
    // The token is loaded before the instance is ready, so no request goes out without it.
    const current = lc.getInstance(request.params.id);
    const tokenFile = typeof b.upstreamTokenFile === 'string' ? b.upstreamTokenFile : current.upstreamTokenFile;
    if (typeof tokenFile === 'string') await readToken(tokenFile);
    const { instance, defaultKey } = await lc.ready(request.params.id, { endpoint: b.endpoint, upstreamTokenFile: b.upstreamTokenFile });
    await ctx.upstreamTokens.load(instance);
    ctx.packTimerChanged();
    if (b.wait === false) {
      defaultKey.catch((err: unknown) => ctx.log.error({ err: (err as Error).message, instance: instance.id }, 'default key creation failed'));
      const view: ReadyView = { ...viewInstance(ctx, instance), defaultKey: null };
      return view;
    }
    let key;
    try {
      key = await defaultKey;
    } catch (err) {
      // The move to ready was written; only the key was not. Say so, and how to get one.
      if (err instanceof ObProxyError && err.code === 'store_write_failed') {
        throw obError('store_write_failed', {
          message: `Instance ${instance.id} is ready, but its default key could not be written (${err.message}) Once the store is writable, create one with \`ob-proxy keys create --instance ${instance.id} --name default\`.`,
        });
      }
      throw err;
    }
    const view: ReadyView = {
      ...viewInstance(ctx, lc.getInstance(instance.id)),
      defaultKey: key === null ? null : { id: key.id, name: key.name, secret: lc.claimSecret(key.id) },
    };
    return view;
  });

  app.post<{ Params: Params }>('/v1/instances/:id/pending', async (request) => viewInstance(ctx, await lc.pending(request.params.id)));

  for (const action of ['stop', 'fail', 'terminate'] as const) {
    app.post<{ Params: Params }>(`/v1/instances/:id/${action}`, async (request) => {
      const inst = await lc.halt(request.params.id, action);
      ctx.packTimerChanged();
      return viewInstance(ctx, inst);
    });
  }

  app.post<{ Params: Params; Body: Body }>('/v1/instances/:id/extend', async (request) => {
    const inst = await lc.extend(request.params.id, str(request.body?.packEndsAt) ?? request.body?.packEndsAt);
    ctx.packTimerChanged();
    return viewInstance(ctx, inst);
  });

  app.delete<{ Params: Params }>('/v1/instances/:id', async (request) => {
    const inst = await lc.remove(request.params.id);
    ctx.upstreamTokens.forget(inst.id);
    ctx.packTimerChanged();
    return { ...viewInstance(ctx, inst), removed: true };
  });
}
