import type { FastifyInstance } from 'fastify';
import { INSTANCE_STATES, type Instance, assertTransition, normalizeEndpoint } from '../../src/domain/instance.js';
import { ObProxyError, obError } from '../../src/errors.js';
import type { HealthView } from '../../src/services/instance-health.js';
import type { ReadyView } from '../../src/wire/views.js';
import type { DaemonContext } from '../context.js';
import { readToken } from '../upstream-tokens.js';
import { str, viewInstance } from './views.js';

type Body = Record<string, unknown> | undefined;
type Params = { id: string };

/**
 * `instances ready` asks the model server for its models first (issue 13 §3): an endpoint where
 * nothing listens, or that lacks the model, is refused before any key is made for it. A state
 * or endpoint that cannot go ready is left for lifecycle.ready to refuse, with its own message.
 */
async function probeBeforeReady(ctx: DaemonContext, current: Instance, rawEndpoint: unknown, token: string | undefined): Promise<{ endpoint: string; view: HealthView } | null> {
  try {
    assertTransition(current, 'ready');
  } catch {
    return null;
  }
  const endpoint = rawEndpoint == null ? current.endpoint : normalizeEndpoint(String(rawEndpoint));
  if (endpoint === null) return null;
  const view = await ctx.health.check(current, endpoint, token);
  if (view.status === 'unreachable') {
    throw obError('endpoint_unreachable', { message: `Instance ${current.id} was not made ready: ${view.error ?? endpoint}. Check the endpoint and that the model server is up, or skip this check with --no-probe.` });
  }
  if (view.status === 'model missing') {
    throw obError('model_not_served', { message: `Instance ${current.id} was not made ready: ${view.error ?? endpoint}. Pull or load the model on the model server, or skip this check with --no-probe.` });
  }
  return { endpoint, view };
}

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
    const token = typeof tokenFile === 'string' ? await readToken(tokenFile) : undefined;
    const probed = b.probe === false ? null : await probeBeforeReady(ctx, current, b.endpoint, token);
    const { instance, defaultKey } = await lc.ready(request.params.id, { endpoint: b.endpoint, upstreamTokenFile: b.upstreamTokenFile });
    await ctx.upstreamTokens.load(instance);
    if (probed !== null && probed.endpoint === instance.endpoint) ctx.health.record(instance, probed.endpoint, probed.view);
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
