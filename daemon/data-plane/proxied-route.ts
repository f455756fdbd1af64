import type { ServerResponse } from 'node:http';
import { clipped } from '../../src/printable.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';
import type { Json } from '../../src/wire/request-checks.js';
import type { HeaderList } from '../../src/services/key-limiter.js';
import type { Instance } from '../../src/domain/instance.js';
import { stringifyExact } from '../../src/wire/json-body.js';
import type { DaemonContext } from '../context.js';
import type { AuthContext } from './auth-context.js';
import { ExchangeEnd, type ExchangeShape } from './exchange-end.js';
import { refusedSinceHeaders } from './key-standing.js';
import { reserveTokens } from './key-limits.js';
import { QueuedRequest, refuseQueued } from './queued-request.js';
import { replyError, writeRawError } from './send-error.js';
import { keepOneCopy } from './held-bytes.js';

import { estimatePromptTokens } from '../../src/wire/prompt-estimate.js';
import { Relay, type RelayAnswer, type RelayContext } from './upstream-relay.js';
import type { RouteSupport } from './route-support.js';
import type { ExchangeSpan } from '../tracing/exchange-span.js';

/** A request checked and ready to send: what its exchange is charged by, and its model. */
export interface Checked extends ExchangeShape {
  model: string;
  /** temperature and top_p as given, or null: a trace span's attributes. */
  temperature: number | null;
  topP: number | null;
}

/** Where a request is sent and what carries its answer: its API's own way, or the API's fallback. */
export interface Route<C extends Checked> {
  /** The model server's path for it (`/v1/chat/completions`). */
  readonly upstreamPath: string;
  /** How the answer is written (plain-relay.ts, stream-relay.ts), in this API's shape. */
  answer(ctx: DaemonContext, rc: RelayContext, checked: C, deployment: string): RelayAnswer;
}

/** A request sent another way: the body that goes upstream, and the route it takes. */
export interface Resend<C extends Checked> {
  body: Buffer | string;
  route: Route<C>;
}

/**
 * One client API the data plane serves (chat completions, Responses, ...): how its body is read
 * and checked, what goes upstream, and which relay carries the answer. Everything else (the
 * key's checks before and at send time, admission, limits, the exchange's accounting, deadlines,
 * caps, revocations, disconnects) is the one request path below, the same for every API.
 */
export interface WireApi<C extends Checked> extends Route<C> {
  /** The route's name, in the access line and the metrics: `chat`, `responses`, ... */
  readonly route: string;
  /** The access line's message. */
  readonly logMessage: string;
  /** The body as every decoder reads it, or a throw (400 invalid_json): json-body.ts's rule. */
  parse(raw: Buffer): Json;
  /** The fields, as this API documents them, or a throw naming the field (400). */
  validate(body: Json): C;
  /** The bytes to send upstream. */
  upstream(raw: Buffer, checked: C): Buffer | string;
  /** Our id for the answer (the model server's may collide). */
  newId(): string;
  /** Which model servers serve the route, learned from their answers; null: every one does. */
  readonly support: RouteSupport | null;
  /** Client headers passed on to the model server (lower case; `anthropic-version`), if any. */
  readonly forwardHeaders?: readonly string[];
  /**
   * For a model server that lacks the route (`support`): the request sent another way (the
   * Responses API translated to chat completions), or null: refused with 404 route_not_found.
   * Throws a 400 naming the field for a request that cannot be sent so.
   */
  readonly fallback: ((checked: C) => Resend<C>) | null;
}

/** 400 model_mismatch: `asked` is neither the instance's model nor one of its aliases. */
export function modelMismatch(instance: Instance, asked: string): ObProxyError {
  return obError('model_mismatch', {
    param: 'model',
    message: `This API key is bound to a deployment of "${instance.model}"; the request asked for "${clipped(asked)}". Set model to "${instance.model}"${instance.aliases.length === 0 ? '' : ` (or one of its aliases: ${instance.aliases.map((a) => `"${a}"`).join(', ')})`}.`,
  });
}

const JSON_TYPE = /^application\/json\s*(;|$)/i;
// JSON is UTF-8 (RFC 8259); a body declared in another charset would be read as something else.
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;
const UTF8 = /^utf-?8$/i;

export function makeProxyHandler<C extends Checked>(ctx: DaemonContext, api: WireApi<C>) {
  // Not async: the reply is hijacked, so Fastify need not wait on a promise for each request.
  return function proxiedRoute(request: FastifyRequest, reply: FastifyReply): void {
    // Checks 3 to 5 again, now that the body is in: before any check of the body (docs/contract.md §3
    // order), and in the turn the request is registered in flight (proxy).
    if (refusedSinceHeaders(ctx, request, reply)) return;
    const auth = request.auth as AuthContext;
    let checked: C;
    let upstream: Buffer | string;
    let route: Route<C> = api;
    try {
      let raw = request.body as Buffer;
      const body = api.parse(Buffer.isBuffer(raw) ? raw : Buffer.alloc(0));
      // An alias the operator gave the instance: the model server receives its own model's id.
      if (body.model !== auth.instance.model && auth.instance.aliases.includes(body.model as string)) {
        body.model = auth.instance.model;
        raw = Buffer.from(stringifyExact(raw, body));
      }
      const type = request.headers['content-type'] ?? '';
      if (!JSON_TYPE.test(type)) {
        throw obError('invalid_request', { message: 'Content-Type must be application/json.' });
      }
      const charset = CHARSET.exec(type);
      if (charset !== null && !UTF8.test(charset[1] ?? '')) {
        throw obError('invalid_request', {
          message: 'The body must be UTF-8: send Content-Type: application/json (charset=utf-8, if any).',
        });
      }
      checked = api.validate(body);
      if (checked.model !== auth.instance.model) throw modelMismatch(auth.instance, checked.model);
      // Built before the reply is hijacked: past that point Fastify can no longer answer a throw.
      // A model server known not to serve the route: the request goes the API's other way, or
      // is refused here, never sent.
      if (api.support !== null && api.support.missing(auth.instance)) {
        if (api.fallback === null) throw api.support.notServed(auth.instance);
        const other = api.fallback(checked);
        upstream = keepOneCopy(request, other.body);
        route = other.route;
      } else upstream = keepOneCopy(request, api.upstream(raw, checked));
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      replyError(reply, err);
      return;
    }
    if (
      !reserveTokens(ctx, request, reply, estimatePromptTokens(upstream.length, checked.media), checked.completionCap)
    )
      return;
    const admission = ctx.admission;
    if (admission === null) {
      ctx.metrics?.addedTime(reply.elapsedTime / 1000);
      send(ctx, api, route, request, reply, checked, upstream, null);
      return;
    }
    const instance = auth.instance.id;
    if (admission.take(instance)) {
      ctx.metrics?.addedTime(reply.elapsedTime / 1000);
      send(ctx, api, route, request, reply, checked, upstream, instance);
    } else if (!reply.raw.destroyed) {
      // (A response already closed would not say so again: its client left, and it waits for no one.)
      const waiter = new QueuedRequest(ctx, request, reply, instance, () =>
        send(ctx, api, route, request, reply, checked, upstream, instance),
      );
      if (admission.wait(instance, waiter) === 'full') refuseQueued(ctx, reply, 'queue_full', instance);
      else ctx.inflight.add(auth.key, waiter);
    }
  };
}

/** Hijacks the reply and sends the request upstream; `slot`: the instance whose admission slot it holds. */
function send<C extends Checked>(
  ctx: DaemonContext,
  api: WireApi<C>,
  route: Route<C>,
  request: FastifyRequest,
  reply: FastifyReply,
  checked: C,
  upstream: Buffer | string,
  slot: string | null,
): void {
  const auth = request.auth as AuthContext;
  reply.hijack();
  try {
    const trace = ctx.tracing === null ? null : ctx.tracing.exchange(reply, auth, checked);
    const forward = api.forwardHeaders === undefined ? null : forwarded(request, api.forwardHeaders);
    proxy(ctx, api, route, request.id, request.rateLimit, forward, reply.raw, auth, checked, upstream, slot, trace);
  } catch (err) {
    // Nothing answers a hijacked reply but us: a throw here would hold the socket until the client left.
    if (slot !== null) ctx.admission?.leave(slot);
    ctx.log.error({ err, reqId: request.id }, 'unhandled error after hijack');
    writeRawError(reply.raw, obError('internal_error'), request.id, request.rateLimit);
    return;
  }
}

/**
 * The exchange of a checked request, sent upstream `route`'s way and answered on `res`: a
 * Fastify request's hijacked response, or a Responses WebSocket message's (responses-socket.ts).
 * `headers`: what every answer carries (the key's x-ratelimit-*, its pack's end); `forward`: the
 * client's headers passed on to the model server; `slot`: the instance whose admission slot it holds.
 */
export function proxy<C extends Checked>(
  ctx: DaemonContext,
  api: WireApi<C>,
  route: Route<C>,
  reqId: string,
  headers: HeaderList | null,
  forward: Record<string, string> | null,
  res: ServerResponse,
  auth: AuthContext,
  checked: C,
  body: Buffer | string,
  slot: string | null,
  trace: ExchangeSpan | null,
): void {
  const exchange = new ExchangeEnd(ctx, res, reqId, auth, checked, body.length, slot, api, trace);
  // Sent its API's own way to a server that may lack the route: its "no such route" is learned,
  // and, where the API has another way, the request goes that way instead of being refused.
  const learns = api.support !== null && route === api;
  // One literal with every field: a field added afterwards gave each request's context a second
  // shape and, past the literal's room, a property store of its own.
  const rc: RelayContext = {
    res,
    id: api.newId(),
    model: checked.model,
    reqId,
    clock: ctx.clock,
    exchange,
    limits: ctx.config,
    deadlines: ctx.deadlines,
    observer: exchange.observer,
    headers,
    log: ctx.log,
    instance: auth.instance.id,
    key: auth.key.id,
    upstreamToken: ctx.upstreamTokens.get(auth.instance.id),
    routeMissing: learns ? (api.support as RouteSupport).learner(auth.instance) : null,
    resend:
      learns && api.fallback !== null ? () => resend(ctx, api, auth, checked, rc, exchange, forward, trace) : null,
    trace,
  };
  dispatch(ctx, route, auth, checked, body, rc, exchange, forward, trace);
}

/** The relay for `rc`'s exchange made and put in flight, and the request sent upstream `route`'s way. */
function dispatch<C extends Checked>(
  ctx: DaemonContext,
  route: Route<C>,
  auth: AuthContext,
  checked: C,
  body: Buffer | string,
  rc: RelayContext,
  exchange: ExchangeEnd,
  forward: Record<string, string> | null,
  trace: ExchangeSpan | null,
): void {
  const relay = new Relay(rc, route.answer(ctx, rc, checked, auth.instance.deployment));
  // In the turn the key was re-checked (refusedSinceHeaders): from here a revocation ends it.
  exchange.node = relay;
  ctx.inflight.add(auth.key, relay);
  try {
    ctx.upstream.dispatch(
      {
        endpoint: auth.instance.endpoint as string,
        body,
        stream: checked.stream,
        path: route.upstreamPath,
        requestId: rc.reqId,
        token: rc.upstreamToken,
        forward,
        trace,
      },
      relay,
    );
  } catch (err) {
    // Answered, and out of the in-flight set, rather than a socket held until the client leaves.
    ctx.log.error({ err, reqId: rc.reqId }, 'upstream request not sent');
    relay.terminate(obError('internal_error'));
  }
}

/**
 * The model server answered that it lacks the route, and nothing has reached the client yet (the
 * relay handed the exchange over): the request goes again, the API's other way (its fallback),
 * in the same exchange, carried by a new relay. A request that cannot be sent so is answered
 * with its 400, and the exchange ends.
 */
function resend<C extends Checked>(
  ctx: DaemonContext,
  api: WireApi<C>,
  auth: AuthContext,
  checked: C,
  rc: RelayContext,
  exchange: ExchangeEnd,
  forward: Record<string, string> | null,
  trace: ExchangeSpan | null,
): void {
  let other: Resend<C>;
  try {
    other = (api.fallback as (checked: C) => Resend<C>)(checked);
  } catch (err) {
    if (!(err instanceof ObProxyError)) throw err;
    writeRawError(rc.res, err, rc.reqId, rc.headers);
    exchange.ended(0, 0, 0, 0, 'error');
    return;
  }
  if (exchange.node !== null) ctx.inflight.delete(exchange.node);
  dispatch(
    ctx,
    other.route,
    auth,
    checked,
    other.body,
    { ...rc, routeMissing: null, resend: null },
    exchange,
    forward,
    trace,
  );
}

/** The client's headers named in `names` that it sent (one value each: repeated ones are joined by Node). */
function forwarded(request: FastifyRequest, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const v = request.headers[name];
    if (typeof v === 'string') out[name] = v;
    else if (Array.isArray(v)) out[name] = v.join(', ');
  }
  return out;
}
