import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyRecord } from '../../src/domain/key.js';
import { type ObProxyError, obError } from '../../src/errors.js';
import type { AuthResult } from '../../src/services/registry.js';
import type { DaemonBasics, KeyCheckDeps } from '../context.js';
import { inflightError } from './inflight.js';
import { replyError } from './send-error.js';

/**
 * Whether a key may still be served: the one place the data plane decides it after the auth hook
 * (docs/contract.md §3 checks 2 to 5). The body handler, a queued request's turn and the in-flight
 * sweep all ask here, so a rule added to one (a pack end, a rotation's grace, a stale store) holds
 * for all three.
 */
export type KeyStandingDeps = Pick<KeyCheckDeps, 'lifecycle' | 'storeStale'> & Pick<DaemonBasics, 'clock' | 'metrics'>;

/** A failed check 2 to 5, or a daemon too long out of sync with its shared store to tell. */
export type Refusal = Extract<AuthResult, { ok: false }> | { ok: false; code: 'store_unreachable'; packEnded?: false };

/** Every key's refusal while the daemon is out of sync with its shared store for too long. */
export const STALE: Refusal = { ok: false, code: 'store_unreachable' };

/** Answers a failed check 2 to 5 (also for a body refused after its key was revoked). */
export function refuse(
  ctx: KeyStandingDeps,
  reply: FastifyReply,
  result: Refusal,
  headers?: Record<string, string>,
): void {
  if (result.code === 'store_unreachable') {
    replyError(reply, obError('store_unreachable'), { ...headers, 'retry-after': '5' });
    return;
  }
  // A pack or a rotation's grace that ended between timer ticks: revoke now; this request is
  // already refused.
  if (result.packEnded === true || result.graceEnded === true) endDuePacksSoon(ctx);
  ctx.metrics?.keyRefused(result.code);
  const extra =
    result.code === 'deployment_not_ready' && result.instance !== undefined
      ? notReady(result.instance.id, result.instance.state)
      : undefined;
  // A secret with a well-formed id that matches no key: the id, so the operator can tell whose
  // key fails (cut or mistyped when a key has that id), never any other part of it.
  if (result.keyId !== undefined) {
    replyError(reply, obError(result.code), headers, {
      key: result.keyId,
      logged: { keyKnown: result.keyKnown === true },
    });
    return;
  }
  replyError(reply, obError(result.code, extra), headers, { key: result.key?.id, instance: result.instance?.id });
}

/**
 * A pending instance may become ready: the client may retry. A stopped, failed or terminated one
 * is never ready again for this key (its keys are revoked with it): it must not.
 */
function notReady(id: string, state: string): { message: string; retry?: boolean } {
  if (state === 'ready')
    return { message: `The deployment "${id}" for this API key is without an endpoint. Retry when it is ready.` };
  if (state === 'pending')
    return { message: `The deployment "${id}" for this API key is pending. Retry when it is ready.` };
  return {
    message: `The deployment "${id}" for this API key is ${state}: it serves no requests. Ask whoever gave you the key for one of a ready instance.`,
    retry: false,
  };
}

export function endDuePacksSoon(ctx: KeyStandingDeps): void {
  // The pack timer follows the stops this makes (daemon/lifecycle-follow.ts).
  void ctx.lifecycle.endDuePacks().catch(() => {});
}

/**
 * docs/contract.md §3 checks 3 to 5 again once the body has arrived, which may be minutes after the
 * headers: the key may have been revoked, or its deployment stopped, removed or past its pack
 * end, meanwhile. The chat handler calls it first, in the turn in which it registers the request
 * in flight, so no revocation falls between this check and the upstream send unseen (it was a
 * `preHandler` hook; Fastify's hook runner made three closures per request for it). Sets
 * `request.auth` to the instance as it is now: its endpoint may have changed.
 * A daemon that has gone out of sync with its shared store for longer than --max-stale since the
 * headers came refuses as it would have then (docs/contract.md §4): a revocation made elsewhere meanwhile
 * cannot have reached this registry.
 */
/** The refusal for an authenticated request whose key or deployment changed since its headers. */
export function recheck(ctx: KeyStandingDeps, request: FastifyRequest): Refusal | null {
  const auth = request.auth;
  if (auth === null) return null;
  if (ctx.storeStale) return STALE;
  const result = ctx.lifecycle.registry.check(auth.key, ctx.clock.now(), true);
  if (!result.ok) return result;
  if (result.instance !== auth.instance) request.auth = { key: auth.key, instance: result.instance };
  return null;
}

/**
 * docs/contract.md §3 checks 2 to 5 again, for a request whose headers passed them: the one place the
 * data plane re-checks a key after its headers. Called when the body is in (before any check of
 * the body, so the order holds), when a queued request's turn comes (in the turn it is sent), and
 * for a body refused as it arrived. A failed check is answered here; returns whether it was.
 */
export function answerIfKeyLapsed(
  ctx: KeyStandingDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  headers?: Record<string, string>,
): boolean {
  const refusal = recheck(ctx, request);
  if (refusal === null) return false;
  refuse(ctx, reply, refusal, headers);
  return true;
}

/**
 * A key with work in flight, checked by the sweep: the error that ends its work, or null while it
 * stands. `requireReady` is false: a deployment moved back to pending keeps its keys and its
 * streams. Sets `due` when a pack or a rotation's grace ended between timer ticks.
 */
export function inflightRefusal(
  ctx: KeyStandingDeps,
  key: KeyRecord,
  now: number,
  due: { pack: boolean },
): ObProxyError | null {
  // Out of sync with a shared store for longer than --max-stale: a key revoked elsewhere
  // meanwhile is not known here, so no key is served, in flight or new (docs/contract.md §4).
  if (ctx.storeStale) return STALE_ERROR;
  const r = ctx.lifecycle.registry.check(key, now, false);
  if (r.ok) return null;
  if (r.packEnded === true || r.graceEnded === true) due.pack = true;
  return inflightError(r.packEnded === true || key.revokeReason === 'pack_ended');
}

const STALE_ERROR = obError('store_unreachable');
