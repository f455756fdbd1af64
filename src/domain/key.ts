import { type UsageByRoute, addByRoute } from './route-usage.js';

export const REVOKE_REASONS = [
  'instance_stopped',
  'instance_failed',
  'instance_terminated',
  'instance_removed',
  'pack_ended',
  'manual',
  'rotated',
] as const;
export type RevokeReason = (typeof REVOKE_REASONS)[number];

/**
 * A key's counters over its whole life (a key never outlives its deployment, so they are also
 * its share of the pack). Requests are those sent to the model server; errors and disconnects
 * are among them: answered with an error (the model server's, or the proxy's after sending it
 * on), or left by the client before the answer ended.
 */
export interface KeyUsage {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  /** As the model server reports it (completion_tokens_details.reasoning_tokens); part of completionTokens. */
  reasoningTokens: number;
  errors: number;
  disconnects: number;
  /**
   * Part of promptTokens and completionTokens: tokens charged by estimate, because the model
   * server never reported them (the client left before the answer ended, or the answer broke
   * off without its usage). docs/operations.md says how they are estimated.
   */
  estimatedTokens: number;
  firstUsedAt: string | null;
  /**
   * requests, promptTokens and completionTokens split by the client API they came through
   * (route-usage.ts); only routes used. Counted since the split existed: a key used before holds
   * less here than in its totals.
   */
  byRoute: UsageByRoute;
}

/**
 * Per-key rate limits (null: none). Enforced in memory; cluster-wide on a shared store (docs/scale-out.md). Stores
 * written before limits existed have none: normalised to all-null when they are loaded.
 */
export interface KeyLimits {
  /** Requests per minute. */
  rpm: number | null;
  /** Tokens (prompt + completion, as the model server reports them) per minute. */
  tpm: number | null;
  /** Requests of this key being answered at once. */
  concurrency: number | null;
}

export const LIMIT_NAMES = ['rpm', 'tpm', 'concurrency'] as const satisfies readonly (keyof KeyLimits)[];

export function noLimits(): KeyLimits {
  return { rpm: null, tpm: null, concurrency: null };
}

/** What the store keeps of a key: never the secret, only its SHA-256. */
export interface KeyRecord {
  id: string;
  name: string;
  instance: string;
  /**
   * The deployment the key was made for (Instance.deployment): an instance id can be removed and
   * added again for another rental, and a key never outlives the deployment it was made for.
   */
  deployment: string;
  hash: string;
  hint: string;
  isDefault: boolean;
  status: 'active' | 'revoked';
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  revokeReason: RevokeReason | null;
  /**
   * When an active key is to be revoked (reason `rotated`): the end of a rotation's grace. The
   * request path refuses it from then on, whether or not the revocation is written yet. Absent
   * or null: no revocation is planned.
   */
  revokeAt?: string | null;
  usage: KeyUsage;
  limits: KeyLimits;
}

export type AuditEventType =
  | 'instance.added'
  | 'instance.state'
  | 'instance.extended'
  | 'instance.aliased'
  | 'instance.removed'
  | 'key.created'
  | 'key.revealed'
  | 'key.revoked'
  | 'key.limited'
  | 'key.rotated'
  | 'models.changed';

/** The audit trail: every key event and instance change, in order. Never holds a secret. */
export interface AuditEvent {
  seq: number;
  at: string;
  type: AuditEventType;
  instance: string;
  keyId?: string;
  keyName?: string;
  state?: string;
  reason?: RevokeReason;
  packEndsAt?: string | null;
  /** key.limited: the key's limits after the change; key.created: its limits, when it has any. */
  limits?: KeyLimits;
  /** instance.aliased: the instance's aliases after the change. */
  aliases?: readonly string[];
  /** key.rotated: the key that replaces this one, and when this one is revoked (the end of the grace). */
  newKeyId?: string;
  revokeAt?: string;
  /** models.changed (whose `instance` is empty: the list is the store's, no instance's): the allowed list after. */
  models?: readonly string[];
}

export function emptyUsage(): KeyUsage {
  return {
    requests: 0,
    promptTokens: 0,
    completionTokens: 0,
    reasoningTokens: 0,
    errors: 0,
    disconnects: 0,
    estimatedTokens: 0,
    firstUsedAt: null,
    byRoute: {},
  };
}

/** Counters of a store written before they existed: none counted then. */
export function normalizeUsage(
  raw: Partial<KeyUsage> & Pick<KeyUsage, 'requests' | 'promptTokens' | 'completionTokens'>,
): KeyUsage {
  return {
    requests: raw.requests,
    promptTokens: raw.promptTokens,
    completionTokens: raw.completionTokens,
    reasoningTokens: raw.reasoningTokens ?? 0,
    errors: raw.errors ?? 0,
    disconnects: raw.disconnects ?? 0,
    estimatedTokens: raw.estimatedTokens ?? 0,
    firstUsedAt: raw.firstUsedAt ?? null,
    byRoute: addByRoute({}, raw.byRoute),
  };
}

/**
 * `b` added to `a`; the earlier first use. `b` may come from a daemon of an older version
 * sharing the store, whose increments lack the newer counters: those add nothing.
 */
export function addUsage(a: KeyUsage, b: Partial<KeyUsage>): KeyUsage {
  const first = b.firstUsedAt ?? null;
  return {
    requests: a.requests + (b.requests ?? 0),
    promptTokens: a.promptTokens + (b.promptTokens ?? 0),
    completionTokens: a.completionTokens + (b.completionTokens ?? 0),
    reasoningTokens: a.reasoningTokens + (b.reasoningTokens ?? 0),
    errors: a.errors + (b.errors ?? 0),
    disconnects: a.disconnects + (b.disconnects ?? 0),
    estimatedTokens: a.estimatedTokens + (b.estimatedTokens ?? 0),
    firstUsedAt: a.firstUsedAt === null || (first !== null && first < a.firstUsedAt) ? first : a.firstUsedAt,
    byRoute: addByRoute(a.byRoute, b.byRoute),
  };
}
