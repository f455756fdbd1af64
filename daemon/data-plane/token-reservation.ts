import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyLimiter } from '../../src/services/key-limiter.js';
import type { DaemonContext } from '../context.js';
import type { AuthContext } from './auth-hook.js';
import { overLimit, retryHeaders } from './key-limits.js';
import { replyError } from './send-error.js';

/**
 * The tokens a request's answer may take, reserved against its key's tpm once its body is read
 * (KeyLimiter.reserve): a key at its tpm, counting what its answers under way reserved, is refused
 * with 429, so a burst of requests sent at once is bounded by their reservations. Given back once:
 * when the exchange is counted (`settleTokens`, which charges its real usage instead), or when its
 * response closes without one (refused, timed out in the queue, its client gone).
 */
class Reserved {
  constructor(
    private readonly limiter: KeyLimiter,
    private readonly keyId: string,
    private tokens: number,
  ) {}

  release(): void {
    this.limiter.release(this.keyId, this.tokens);
    this.tokens = 0;
  }
}

const RESERVED = Symbol('reserved tokens');
type ReservingResponse = ServerResponse & { [RESERVED]?: Reserved | null };

/** One listener for every response (no closure per request). */
function releaseReserved(this: ReservingResponse): void {
  const r = this[RESERVED];
  if (r == null) return;
  this[RESERVED] = null;
  r.release();
}

/**
 * Before the request waits or is sent: `prompt`, the estimate of its prompt's tokens
 * (prompt-estimate.ts), and `cap`, its completion's cap as the model server is sent it (null: none).
 * Answers the refusal and returns false when the key is at its tpm; keys without one pass at once.
 */
export function reserveTokens(
  ctx: DaemonContext,
  request: FastifyRequest,
  reply: FastifyReply,
  prompt: number,
  cap: number | null,
): boolean {
  const { key, instance } = request.auth as AuthContext;
  const tpm = key.limits.tpm;
  if (tpm === null) return true;
  const r = ctx.keyLimits.reserve(key, prompt, cap, ctx.clock.now());
  request.rateLimit = r.headers;
  if (r.refused) {
    ctx.metrics?.rateLimited(instance.id, 'tpm');
    replyError(reply, overLimit('tpm', tpm, r.retryAfterMs), retryHeaders(r.retryAfterMs), key.id);
    return false;
  }
  if (r.tokens > 0) {
    const res = reply.raw as ReservingResponse;
    res[RESERVED] = new Reserved(ctx.keyLimits, key.id, r.tokens);
    res.on('close', releaseReserved);
  }
  return true;
}

/**
 * The exchange is over and counted: its reservation is given back, and `tokens`, what it took,
 * charged against the key's tpm (`tpm`: the key's now, null when it has none).
 */
export function settleTokens(
  ctx: DaemonContext,
  res: ServerResponse,
  keyId: string,
  tokens: number,
  now: number,
  tpm: number | null,
): void {
  releaseReserved.call(res as ReservingResponse);
  if (tpm !== null) ctx.keyLimits.chargeTokens(keyId, tokens, now, tpm);
}
