import type { FastifyInstance } from 'fastify';
import type { KeyRecord } from '../../src/domain/key.js';
import type { KeyPage } from '../../src/services/registry.js';
import type {
  KeyPageView,
  KeyWithSecret,
  RevocationPageView,
  RevocationView,
  RevokedKeyView,
  RotatedKeyView,
} from '../../src/wire/views.js';
import { revocationOfKey } from '../../src/wire/views.js';
import { obError } from '../../src/errors.js';
import type { DaemonBasics, KeyCheckDeps } from '../context.js';
import {
  AUDIT_QUERY,
  CREATE_KEY_BODY,
  type CreateKeyBody,
  ID_PARAMS,
  KEYS_QUERY,
  type ListQuery,
  LIMITS_BODY,
  NO_BODY,
  REVOCATIONS_QUERY,
  ROTATE_BODY,
} from './schemas.js';
import { pageAfter, pageLimit, sendArrayInPieces, sendPageInPieces, sendWholeList } from './list-pages.js';
import { stillListening } from './instances.js';
import { viewKey } from './views.js';

type Params = { id: string };

export function registerKeyRoutes(
  app: FastifyInstance,
  ctx: Pick<KeyCheckDeps, 'lifecycle'> & Pick<DaemonBasics, 'log'>,
): void {
  const lc = ctx.lifecycle;
  const byId = { schema: { params: ID_PARAMS, body: NO_BODY } };

  app.get<{ Querystring: ListQuery }>('/v1/keys', { schema: { querystring: KEYS_QUERY } }, async (request, reply) => {
    const { instance, status } = request.query;
    const limit = pageLimit(request.query.limit);
    const after = pageAfter(lc.registry, request.query.after);
    const page = (a: KeyRecord | null, n: number): KeyPage =>
      lc.registry.keyPage({ instance, status, after: a, limit: n });
    if (limit === undefined) {
      return sendWholeList(
        reply,
        request.query.format === 'lines',
        page,
        (k) => viewKey(ctx, k),
        (id) => lc.registry.keys.get(id),
      );
    }
    return sendPageInPieces(reply, 'keys' satisfies keyof KeyPageView, page(after, limit), (k) => viewKey(ctx, k));
  });

  app.post<{ Body: CreateKeyBody }>('/v1/keys', { schema: { body: CREATE_KEY_BODY } }, async (request, reply) => {
    const b = request.body;
    const created = await lc.createKey(b.instance, b.name, b.limits);
    // A client gone while the key was written (its store commit may take seconds) would take
    // the only showing of the secret with it: kept for `keys reveal` instead.
    if (!stillListening(request)) {
      lc.keepUndisplayed(created);
      ctx.log.info(
        { instance: created.key.instance, key: created.key.id },
        'new key not shown: the client went away; reveal it once with keys reveal',
      );
    }
    const { key, secret } = created;
    const out: KeyWithSecret = { ...viewKey(ctx, key), secret };
    return reply.code(201).send(out);
  });

  // Body: any of rpm, tpm, concurrency; null removes that limit, an absent field keeps it.
  app.post<{ Params: Params; Body: unknown }>(
    '/v1/keys/:id/limits',
    { schema: { params: ID_PARAMS, body: LIMITS_BODY } },
    async (request) => viewKey(ctx, await lc.setKeyLimits(request.params.id, request.body ?? {})),
  );

  app.get<{ Params: Params }>('/v1/keys/:id', { schema: { params: ID_PARAMS } }, async (request) =>
    viewKey(ctx, lc.getKey(request.params.id)),
  );

  // Body: graceSeconds, how long the old key still serves (0 or absent: revoked at once).
  app.post<{ Params: Params; Body: { graceSeconds?: number } | null }>(
    '/v1/keys/:id/rotate',
    { schema: { params: ID_PARAMS, body: ROTATE_BODY } },
    async (request, reply) => {
      const rotated = await lc.rotateKey(request.params.id, (request.body?.graceSeconds ?? 0) * 1000);
      // As for a creation: a client gone meanwhile leaves the new secret for `keys reveal`.
      if (!stillListening(request)) lc.keepUndisplayed(rotated);
      const out: RotatedKeyView = {
        ...viewKey(ctx, rotated.key),
        secret: rotated.secret,
        replaces: viewKey(ctx, rotated.old),
      };
      return reply.code(201).send(out);
    },
  );

  app.post<{ Params: Params }>('/v1/keys/:id/revoke', byId, async (request): Promise<RevokedKeyView> => {
    const key = await lc.revokeKey(request.params.id);
    const pending = lc.revocationPending(key.id);
    return { ...viewKey(ctx, key), ...(pending === null ? {} : { storePending: pending }) };
  });

  app.post<{ Params: Params }>('/v1/keys/:id/reveal', byId, async (request) => {
    // A client that gave up while the daemon was busy would take the one showing with it.
    if (!stillListening(request))
      throw obError('reveal_refused', { message: 'The client went away; the secret was kept for the next reveal.' });
    const { key, secret } = await lc.revealKey(request.params.id);
    const out: KeyWithSecret = { ...viewKey(ctx, key), secret };
    return out;
  });

  // Every revoked key, by when it was revoked, from its own record: the audit trail is the
  // store's, and its older events may be archived.
  app.get<{ Querystring: ListQuery }>(
    '/v1/revocations',
    { schema: { querystring: REVOCATIONS_QUERY } },
    async (request, reply) => {
      const { instance } = request.query;
      const limit = pageLimit(request.query.limit);
      const after = pageAfter(lc.registry, request.query.after);
      const page = (a: KeyRecord | null, n: number): KeyPage =>
        lc.registry.revocationPage({ instance, after: a, limit: n });
      const view = (k: KeyRecord): RevocationView => revocationOfKey(k)!;
      if (limit === undefined)
        return sendWholeList(reply, request.query.format === 'lines', page, view, (id) => lc.registry.keys.get(id));
      return sendPageInPieces(reply, 'revocations' satisfies keyof RevocationPageView, page(after, limit), view);
    },
  );

  app.get<{ Querystring: { instance?: string; limit?: string } }>(
    '/v1/audit',
    { schema: { querystring: AUDIT_QUERY } },
    async (request, reply) => {
      const inst = request.query.instance;
      const limit = Math.min(Math.max(Number(request.query.limit ?? 500) || 500, 1), 10_000);
      // Sent in pieces: 10,000 events written at once held every request for over 10 ms.
      return sendArrayInPieces(reply, await lc.auditEvents({ instance: inst, limit }), (e) => e);
    },
  );
}
