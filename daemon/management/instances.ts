import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type Instance, type InstanceState, assertTransition, normalizeEndpoint } from '../../src/domain/instance.js';
import { ObProxyError, obError } from '../../src/errors.js';
import type { HealthView } from '../../src/services/instance-health.js';
import type { AddedView, ReadyView } from '../../src/wire/views.js';
import type { DaemonBasics, ExchangeDeps } from '../context.js';
import {
  ADD_INSTANCE_BODY,
  ALIASES_BODY,
  type AddInstanceBody,
  type AliasesBody,
  EXTEND_BODY,
  ID_PARAMS,
  INSTANCES_QUERY,
  NO_BODY,
  READY_BODY,
  type ReadyBody,
} from './schemas.js';
import { type ViewDeps, viewInstance } from './views.js';
import { sendArrayInPieces } from './list-pages.js';
import { sortInPieces } from './sort-in-pieces.js';

/** localeCompare's order (the default locale's), without a collator made per comparison. */
const collate = new Intl.Collator().compare;

type Params = { id: string };

/**
 * Whether the client that asked is still connected, to be shown what it asked for. (An injected
 * request's stand-in socket says neither.)
 */
export function stillListening(request: FastifyRequest): boolean {
  const socket = request.raw.socket as Partial<Socket> | null;
  return socket?.destroyed !== true && socket?.writable !== false;
}

/**
 * `instances ready` asks the model server for its models first: an endpoint where
 * nothing listens, or that lacks the model, is refused before any key is made for it. A state
 * or endpoint that cannot go ready is left for lifecycle.ready to refuse, with its own message.
 */
async function probeBeforeReady(
  ctx: Pick<ViewDeps, 'health'>,
  current: Instance,
  rawEndpoint: unknown,
  token: string | undefined,
): Promise<{ endpoint: string; view: HealthView } | null> {
  try {
    assertTransition(current, 'ready');
  } catch {
    return null;
  }
  const endpoint = rawEndpoint == null ? current.endpoint : normalizeEndpoint(String(rawEndpoint));
  if (endpoint === null) return null;
  const view = await ctx.health.check(current, endpoint, token);
  if (view.status === 'unreachable') {
    throw obError('endpoint_unreachable', {
      message: `Instance ${current.id} was not made ready: ${view.error ?? endpoint}. Check the endpoint and that the model server is up, or skip this check with --no-probe.`,
    });
  }
  if (view.status === 'model missing') {
    throw obError('model_not_served', {
      message: `Instance ${current.id} was not made ready: ${view.error ?? endpoint}. Pull or load the model on the model server, or skip this check with --no-probe.`,
    });
  }
  return { endpoint, view };
}

/** What the instance routes touch: the lifecycle, the probes, the model servers' tokens, the log. */
export type InstanceRouteDeps = ViewDeps & Pick<ExchangeDeps, 'upstreamTokens'> & Pick<DaemonBasics, 'log'>;

/**
 * The instance routes translate HTTP to lifecycle calls and views. What follows a change (the
 * pack timer, the upstream token) is the daemon's subscription, daemon/lifecycle-follow.ts.
 */
export function registerInstanceRoutes(app: FastifyInstance, ctx: InstanceRouteDeps): void {
  const lc = ctx.lifecycle;
  const byId = { schema: { params: ID_PARAMS, body: NO_BODY } };

  app.get<{ Querystring: { state?: InstanceState } }>(
    '/v1/instances',
    { schema: { querystring: INSTANCES_QUERY } },
    async (request, reply) => {
      const state = request.query.state;
      // Sorted in pieces: 50,000 instances sorted at once (ICU's comparisons) held every request
      // for 60 ms and more.
      const list = await sortInPieces(
        [...lc.registry.instances.values()].filter((i) => state === undefined || i.state === state),
        (a, b) => collate(a.createdAt, b.createdAt) || collate(a.id, b.id),
      );
      return sendArrayInPieces(reply, list, (i) => viewInstance(ctx, i));
    },
  );

  app.get<{ Params: Params }>('/v1/instances/:id', { schema: { params: ID_PARAMS } }, async (request) =>
    viewInstance(ctx, lc.getInstance(request.params.id)),
  );

  app.post<{ Body: AddInstanceBody }>(
    '/v1/instances',
    { schema: { body: ADD_INSTANCE_BODY } },
    async (request, reply) => {
      const b = request.body;
      // Read before the change: an unreadable file refuses it, and the instance has its token from its first moment.
      const token = b.upstreamTokenFile == null ? undefined : await ctx.upstreamTokens.prepare(b.upstreamTokenFile);
      const inst = await lc.addInstance(b);
      const view: AddedView = viewInstance(ctx, inst);
      // A model id allowed by hand is easily misspelt, or not pulled yet: said now rather than
      // at `ready`. A server not up yet is usual at this point and is not mentioned.
      if (inst.endpoint !== null) {
        const probed = await ctx.health.check(inst, inst.endpoint, token);
        if (probed.status === 'model missing' && probed.error !== null) view.modelNotServed = probed.error;
      }
      return reply.code(201).send(view);
    },
  );

  app.post<{ Params: Params; Body: ReadyBody | null }>(
    '/v1/instances/:id/ready',
    { schema: { params: ID_PARAMS, body: READY_BODY } },
    async (request) => {
      const b = request.body ?? {};
      const current = lc.getInstance(request.params.id);
      // Read before the change, for the probe and so that no request goes out without it.
      const tokenFile = b.upstreamTokenFile ?? current.upstreamTokenFile;
      const token = tokenFile == null ? undefined : await ctx.upstreamTokens.prepare(tokenFile);
      const probed = b.probe === false ? null : await probeBeforeReady(ctx, current, b.endpoint, token);
      const { instance, defaultKey } = await lc.ready(request.params.id, {
        endpoint: b.endpoint,
        upstreamTokenFile: b.upstreamTokenFile,
      });
      if (probed !== null && probed.endpoint === instance.endpoint)
        ctx.health.record(instance, probed.endpoint, probed.view);
      if (b.wait === false) {
        defaultKey.catch((err: unknown) =>
          ctx.log.error({ err: (err as Error).message, instance: instance.id }, 'default key creation failed'),
        );
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
      // The client may have given up while the key was made (OB_PROXY_CLI_TIMEOUT, Ctrl-C): a
      // secret claimed for it would be shown to nobody, and `keys reveal` would then refuse it as
      // displayed. Left unclaimed, it waits for `keys reveal` or the console, like --no-wait's.
      const secret = key === null || !stillListening(request) ? null : lc.claimSecret(key.id);
      if (key !== null && secret === null)
        ctx.log.info(
          { instance: instance.id, key: key.id },
          'default key not shown: the client went away; reveal it once with keys reveal',
        );
      const view: ReadyView = {
        ...viewInstance(ctx, lc.getInstance(instance.id)),
        defaultKey: key === null ? null : { id: key.id, name: key.name, secret },
      };
      return view;
    },
  );

  app.post<{ Params: Params }>('/v1/instances/:id/pending', byId, async (request) =>
    viewInstance(ctx, await lc.pending(request.params.id)),
  );

  for (const action of ['stop', 'fail', 'terminate'] as const) {
    app.post<{ Params: Params }>(`/v1/instances/:id/${action}`, byId, async (request) =>
      viewInstance(ctx, await lc.halt(request.params.id, action)),
    );
  }

  app.post<{ Params: Params; Body: { packEndsAt: string; shorten?: boolean } }>(
    '/v1/instances/:id/extend',
    { schema: { params: ID_PARAMS, body: EXTEND_BODY } },
    async (request) =>
      viewInstance(
        ctx,
        await lc.extend(request.params.id, request.body.packEndsAt, { shorten: request.body.shorten === true }),
      ),
  );

  // Body: `add` aliases, `remove` some or `clear` them all; the answer is the instance after.
  app.post<{ Params: Params; Body: AliasesBody }>(
    '/v1/instances/:id/aliases',
    { schema: { params: ID_PARAMS, body: ALIASES_BODY } },
    async (request) => viewInstance(ctx, await lc.alias(request.params.id, request.body)),
  );

  app.delete<{ Params: Params }>('/v1/instances/:id', byId, async (request) => ({
    ...viewInstance(ctx, await lc.remove(request.params.id)),
    removed: true,
  }));
}
