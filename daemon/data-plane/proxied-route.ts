import { clipped } from '../../src/printable.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';
import type { Instance } from '../../src/domain/instance.js';
import { stringifyExact } from '../../src/wire/json-body.js';
import type { ExchangeDeps } from '../context.js';
import type { AuthContext } from './auth-context.js';
import { type AccountingDeps, ExchangeAccount } from './accounting.js';
import { answerIfKeyLapsed } from './key-standing.js';
import { type KeyLimitDeps, reserveTokens } from './key-limits.js';
import { type QueueDeps, QueuedRequest, refuseQueued } from './queued-request.js';
import { replyError, writeRawError } from './send-error.js';
import { holdOnlyUpstreamBytes } from './body-reader.js';

import { estimatePromptTokens } from '../../src/wire/prompt-estimate.js';
import { Relay, type RelayContext } from './upstream-relay.js';
import type { RouteSupport } from './route-support.js';
import type { Exchange } from './exchange.js';
import type { AnswerDeps, Checked, Resend, Route, WireApi } from './wire-api.js';

/** 400 model_mismatch: `asked` is neither the instance's model nor one of its aliases. */
export function modelMismatch(instance: Instance, asked: string): ObProxyError {
  return obError('model_mismatch', {
    param: 'model',
    message: `This API key is bound to a deployment of "${instance.model}"; the request asked for "${clipped(asked)}". Set model to "${instance.model}"${instance.aliases.length === 0 ? '' : ` (or one of its aliases: ${instance.aliases.map((a) => `"${a}"`).join(', ')})`}.`,
  });
}

/**
 * What the request path touches once the body is in: the key's standing and limits, the queue,
 * the exchange's accounting and its answer, and the upstream it is sent to.
 */
export type ProxyDeps = QueueDeps &
  KeyLimitDeps &
  AccountingDeps &
  AnswerDeps &
  Pick<ExchangeDeps, 'tracing' | 'deadlines' | 'upstreamTokens' | 'upstream'>;

const JSON_TYPE = /^application\/json\s*(;|$)/i;
// JSON is UTF-8 (RFC 8259); a body declared in another charset would be read as something else.
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;
const UTF8 = /^utf-?8$/i;

export function makeProxyHandler<C extends Checked>(ctx: ProxyDeps, api: WireApi<C>) {
  // Not async: the reply is hijacked, so Fastify need not wait on a promise for each request.
  return function proxiedRoute(request: FastifyRequest, reply: FastifyReply): void {
    // Checks 3 to 5 again, now that the body is in: before any check of the body (docs/contract.md §3
    // order), and in the turn the request is registered in flight (proxy).
    if (answerIfKeyLapsed(ctx, request, reply)) return;
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
        upstream = holdOnlyUpstreamBytes(request, other.body);
        route = other.route;
      } else upstream = holdOnlyUpstreamBytes(request, api.upstream(raw, checked));
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      replyError(reply, err);
      return;
    }
    if (
      !reserveTokens(ctx, request, reply, estimatePromptTokens(upstream.length, checked.media), checked.completionCap)
    )
      return;
    // The exchange, made once: `send` fills in what holds when it is sent.
    const x: Exchange<C> = {
      api,
      route,
      reqId: request.id,
      auth,
      checked,
      body: upstream,
      res: reply.raw,
      headers: null,
      forward: null,
      slot: null,
      trace: null,
    };
    const admission = ctx.admission;
    if (admission === null) {
      ctx.metrics?.addedTime(reply.elapsedTime / 1000);
      send(ctx, x, reply);
      return;
    }
    const instance = auth.instance.id;
    x.slot = instance;
    if (admission.take(instance)) {
      ctx.metrics?.addedTime(reply.elapsedTime / 1000);
      send(ctx, x, reply);
    } else if (!reply.raw.destroyed) {
      // (A response already closed would not say so again: its client left, and it waits for no one.)
      const waiter = new QueuedRequest(ctx, request, reply, instance, () => send(ctx, x, reply));
      if (admission.wait(instance, waiter) === 'full') refuseQueued(ctx, reply, 'queue_full', instance);
      else ctx.inflight.add(auth.key, waiter);
    }
  };
}

/**
 * Hijacks the reply and sends `x` upstream, with its key and instance as the last re-check found
 * them (a queued request's turn re-checks), and the headers every answer to it carries.
 */
function send<C extends Checked>(ctx: ProxyDeps, x: Exchange<C>, reply: FastifyReply): void {
  const request = reply.request;
  x.auth = request.auth as AuthContext;
  x.headers = request.rateLimit;
  reply.hijack();
  try {
    x.trace = ctx.tracing === null ? null : ctx.tracing.exchange(reply, x.auth, x.checked);
    x.forward = x.api.forwardHeaders === undefined ? null : forwarded(request, x.api.forwardHeaders);
    proxy(ctx, x);
  } catch (err) {
    // Nothing answers a hijacked reply but us: a throw here would hold the socket until the client left.
    if (x.slot !== null) ctx.admission?.leave(x.slot);
    ctx.log.error({ err, reqId: request.id }, 'unhandled error after hijack');
    writeRawError(reply.raw, obError('internal_error'), request.id, request.rateLimit);
    return;
  }
}

/**
 * The exchange of a checked request, sent upstream its route's way and answered on its `res`: a
 * Fastify request's hijacked response, or a Responses WebSocket message's (responses-socket.ts).
 */
export function proxy<C extends Checked>(ctx: ProxyDeps, x: Exchange<C>): void {
  const { api, auth } = x;
  const end = new ExchangeAccount(ctx, x);
  // Sent its API's own way to a server that may lack the route: its "no such route" is learned,
  // and, where the API has another way, the request goes that way instead of being refused.
  const learns = api.support !== null && x.route === api;
  // One literal with every field: a field added afterwards gave each request's context a second
  // shape and, past the literal's room, a property store of its own.
  const rc: RelayContext = {
    res: x.res,
    id: api.newId(),
    model: x.checked.model,
    reqId: x.reqId,
    clock: ctx.clock,
    exchange: end,
    limits: ctx.config,
    deadlines: ctx.deadlines,
    watch: end.watch,
    observer: end.observer,
    headers: x.headers,
    log: ctx.log,
    instance: auth.instance.id,
    key: auth.key.id,
    upstreamToken: ctx.upstreamTokens.get(auth.instance.id),
    routeMissing: learns ? (api.support as RouteSupport).learner(auth.instance) : null,
    resend: learns && api.fallback !== null ? () => resend(ctx, x, rc, end) : null,
    trace: x.trace,
  };
  dispatch(ctx, x, rc, end);
}

/** The relay for `rc`'s exchange made and put in flight, and the request sent upstream its route's way. */
function dispatch<C extends Checked>(ctx: ProxyDeps, x: Exchange<C>, rc: RelayContext, end: ExchangeAccount): void {
  const auth = x.auth;
  const relay = new Relay(rc, x.route.answer(ctx, rc, x.checked, auth.instance.deployment));
  end.relay = relay;
  // In the turn the key was re-checked (answerIfKeyLapsed): from here a revocation ends it. A
  // resend's exchange is in the list already, and stays.
  if (end.inflightEntry === null) ctx.inflight.add(auth.key, end);
  try {
    ctx.upstream.dispatch(
      {
        endpoint: auth.instance.endpoint as string,
        body: x.body,
        stream: x.checked.stream,
        path: x.route.upstreamPath,
        requestId: rc.reqId,
        token: rc.upstreamToken,
        forward: x.forward,
        trace: x.trace,
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
function resend<C extends Checked>(ctx: ProxyDeps, x: Exchange<C>, rc: RelayContext, end: ExchangeAccount): void {
  let other: Resend<C>;
  try {
    other = (x.api.fallback as (checked: C) => Resend<C>)(x.checked);
  } catch (err) {
    if (!(err instanceof ObProxyError)) throw err;
    writeRawError(rc.res, err, rc.reqId, rc.headers);
    end.ended(0, 0, 0, 0, 'error');
    return;
  }
  x.route = other.route;
  x.body = other.body;
  dispatch(ctx, x, { ...rc, routeMissing: null, resend: null }, end);
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
