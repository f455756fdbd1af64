import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { obError } from '../../src/errors.js';
import type { KeyCheckDeps } from '../context.js';
import { clientOf } from './bad-key-limiter.js';
import { type BodyDeps, holdBody } from './body-reader.js';
import { type KeyLimitDeps, admitKey } from './key-limits.js';
import { packHeaders } from './pack-headers.js';
import { sendContinue } from './before-fastify-refusals.js';
import { type KeyStandingDeps, STALE, refuse } from './key-standing.js';
import { replyError } from './send-error.js';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** What the checks before the body read: the key's standing and limits, the body budget, the refusals. */
export type AuthHookDeps = Pick<KeyCheckDeps, 'draining' | 'badKeys'> & KeyStandingDeps & KeyLimitDeps & BodyDeps;

/**
 * docs/contract.md §3 checks 1 to 4, in an onRequest hook: before the body is read, from memory only.
 * `requireReady` is false for GET /v1/models, which answers whatever the instance's state.
 * Callback style, not async: nothing here waits, and a promise per request is measurable.
 * A refusal is sent from the hook and `done` is not called, which ends the request there.
 */
export function makeAuthHook(ctx: AuthHookDeps, requireReady: boolean, apiKeyHeader = false) {
  return function authHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (ctx.draining) {
      replyError(reply, obError('shutting_down'), { 'retry-after': '1', connection: 'close' });
      return;
    }
    const header = request.headers.authorization;
    const match = header === undefined ? null : BEARER.exec(header);
    const secret = apiKeyHeader ? anthropicKey(request, match) : match?.[1];
    if (secret === null) {
      ctx.metrics?.keyRefused('conflicting_api_keys');
      replyError(reply, obError('conflicting_api_keys'));
      return;
    }
    if (secret === undefined) {
      ctx.metrics?.keyRefused('missing_api_key');
      replyError(
        reply,
        obError(
          'missing_api_key',
          apiKeyHeader
            ? { message: MISSING_ANTHROPIC_KEY }
            : header === undefined
              ? undefined
              : {
                  message: 'The Authorization header must be "Bearer ob_sk_…" (SDKs: set apiKey).',
                },
        ),
      );
      return;
    }
    // Out of sync with a shared store for too long: any key may have been revoked elsewhere.
    if (ctx.storeStale) {
      refuse(ctx, reply, STALE);
      return;
    }
    const now = ctx.clock.now();
    // Authenticate first: a valid key is never slowed by bad keys sent from the same address
    // (a NAT or office shares one). The lookup is an in-memory hash, so it costs a guesser nothing.
    const result = ctx.lifecycle.registry.authenticate(secret, now, requireReady);
    if (!result.ok) {
      if (result.code === 'invalid_api_key') {
        // The socket's address (client headers such as X-Forwarded-For are not trusted), an IPv6
        // one as its /64.
        const client = clientOf(request.ip);
        if (ctx.badKeys.blocked(client, now)) {
          ctx.metrics?.keyRefused('rate_limited');
          replyError(reply, obError('rate_limited'), {
            'retry-after': String(ctx.badKeys.retryAfterSeconds(client, now)),
          });
          return;
        }
        // One line when an address starts being refused, not one per refusal: a guesser must not
        // be able to fill the operator's disk with log lines.
        if (ctx.badKeys.strike(client, now))
          request.log.warn(
            { address: client, limit: ctx.config.badKeyLimit },
            'too many invalid keys from this address: refusing its invalid keys with 429 for the rest of the minute',
          );
      }
      // A key whose deployment is not ready is the key's own: its answer carries its pack's end.
      if (result.code === 'deployment_not_ready' && result.instance !== undefined)
        request.rateLimit = packHeaders(result.instance, now, ctx.config.packWarningMs);
      refuse(ctx, reply, result);
      return;
    }
    request.auth = { key: result.key, instance: result.instance };
    // The pack's end on every answer to the key, kept with its x-ratelimit-* (admitKey).
    request.rateLimit = packHeaders(result.instance, now, ctx.config.packWarningMs);
    // Per-key limits count chat completions only (requireReady), not model listings.
    if (requireReady && !admitKey(ctx, request, reply, result.key, result.instance.id)) return;
    // Its body in the daemon's byte budget, before any of it is read (body-reader.ts).
    if (requireReady && !holdBody(ctx, request, reply, result.key.id)) return;
    // The go-ahead for a body held back (Expect: 100-continue), now that the key has passed.
    if (request.headers.expect !== undefined) sendContinue(reply.raw);
    done();
  };
}

const MISSING_ANTHROPIC_KEY =
  'No API key: send the header "x-api-key: ob_sk_…" or "Authorization: Bearer ob_sk_…" (Anthropic SDK: set apiKey or authToken).';

/**
 * The key of a Messages request (docs/contract.md §6): in `x-api-key`, as Anthropic's clients send
 * it, or in `Authorization: Bearer` (their `authToken`). Both present must name the same key:
 * the request is refused (null) rather than one of them chosen silently. Undefined: no key.
 */
function anthropicKey(request: FastifyRequest, bearer: RegExpExecArray | null): string | null | undefined {
  const header = request.headers['x-api-key'];
  const key = typeof header === 'string' ? header.trim() : '';
  if (key === '') return bearer?.[1];
  if (request.headers.authorization !== undefined && bearer?.[1] !== key) return null;
  return key;
}
