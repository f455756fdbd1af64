import type { Instance } from '../domain/instance.js';
import type { KeyLimits, KeyRecord, KeyUsage, RevokeReason } from '../domain/key.js';
import { addByRoute } from '../domain/route-usage.js';
import type { HealthView } from '../services/instance-health.js';
import type { DaemonsView } from '../services/revocation-confirmation.js';

/** docs/contract.md §2 JSON shapes. Built field by field so no store-only field (hash) can leak. */
export interface InstanceView {
  id: string;
  model: string;
  /** Other model ids its keys may send as `model`; absent from a daemon older than aliases. */
  aliases?: string[];
  endpoint: string | null;
  state: Instance['state'];
  packEndsAt: string | null;
  /** Where the daemon reads the model server's token from; null when none is sent. */
  upstreamTokenFile?: string | null;
  activeKeys: number;
  createdAt: string;
  updatedAt: string;
  /** The last probe of its model server while ready (`reachable`, `unreachable`, `model missing`); null when none applies. */
  health: HealthView | null;
}

export interface KeyView {
  id: string;
  name: string;
  instance: string;
  status: 'active' | 'revoked';
  hint: string;
  isDefault: boolean;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
  revokeReason: RevokeReason | null;
  /** An active key replaced by a rotation: when it is revoked (reason rotated). Absent otherwise. */
  revokeAt?: string;
  usage: KeyUsage;
  /** Per-key limits (null: none), enforced by each daemon. */
  limits: KeyLimits;
  /** True while a default key's secret was never displayed and can be revealed once. */
  revealable: boolean;
}

/**
 * The answer to a revocation. `storePending`: a shared store has every daemon refuse the key,
 * but its row and audit event could not be written yet (why, as the store said); they are
 * written as soon as it takes writes.
 */
export interface RevokedKeyView extends KeyView {
  storePending?: string;
}

export interface RevocationView {
  keyId: string;
  name: string;
  instance: string;
  revokedAt: string;
  reason: RevokeReason;
}

/** `models list`: the ids an instance may be added with, and what runs each. */
export interface ModelsView {
  /** Each allowed id, with the instances that are not terminated running it (they keep it allowed). */
  models: { id: string; instances: string[] }[];
  /**
   * `store`: the list `models allow`/`disallow` wrote, the same on every daemon of the store;
   * `start`: never written, this daemon's OB_PROXY_MODELS (or the default ids).
   */
  source: 'store' | 'start';
}

export interface KeyWithSecret extends KeyView {
  secret: string;
}

/** `keys rotate`: the new key with its secret, and the key it replaces (revoked, or with its `revokeAt`). */
export interface RotatedKeyView extends KeyWithSecret {
  replaces: KeyView;
}

/** `instances add`: the instance, and what its model server said when it lacks the model. */
export interface AddedView extends InstanceView {
  /** The model server answered but does not list the instance's model (what it lists, named). */
  modelNotServed?: string;
}

export interface ReadyView extends InstanceView {
  defaultKey: { id: string; name: string; secret: string | null } | null;
}

export interface StatusView {
  version: string;
  pid: number;
  baseUrl: string;
  store: string;
  socket: string;
  startedAt: string;
  models: string[];
  /** A store shared by several daemons (PostgreSQL): how this daemon stands with it. Null: this daemon is the store's only writer. */
  storeSync?: StoreSyncView | null;
  /** Every daemon of the store, as each last reported (docs/scale-out.md); `shared` false on a file store. */
  daemons?: DaemonsView & { problem?: string };
}

export interface StoreSyncView {
  /** Where the store is (a URL without its password). */
  location: string;
  /** `in_sync`: keys are served; `stale`: out of sync for longer than --max-stale, every key refused (503). */
  state: 'in_sync' | 'stale';
  /** When this daemon last knew itself in sync (a read of the change log that began then succeeded). */
  lastSyncAt: string;
  lastSyncAgeMs: number;
  maxStaleMs: number;
  /** Whether this daemon does the cluster's chores (ending packs on their clock). */
  holdsChores: boolean;
  /** Why it is not in sync, as the database said (`cannot read …`, `cannot write …`); null while it reads and writes. */
  problem: string | null;
}

export function storeSyncView(s: {
  location: string;
  lastInSync: number;
  now: number;
  maxStaleMs: number;
  stale: boolean;
  holdsChores: boolean;
  problem: string | null;
}): StoreSyncView {
  return {
    location: s.location,
    state: s.stale ? 'stale' : 'in_sync',
    lastSyncAt: new Date(s.lastInSync).toISOString(),
    lastSyncAgeMs: Math.max(0, s.now - s.lastInSync),
    maxStaleMs: s.maxStaleMs,
    holdsChores: s.holdsChores,
    problem: s.problem,
  };
}

export function instanceView(i: Instance, activeKeys: number, health: HealthView | null = null): InstanceView {
  return {
    id: i.id,
    model: i.model,
    aliases: [...i.aliases],
    endpoint: i.endpoint,
    state: i.state,
    packEndsAt: i.packEndsAt,
    upstreamTokenFile: i.upstreamTokenFile ?? null,
    activeKeys,
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
    health: health === null ? null : { ...health },
  };
}

export function keyView(k: KeyRecord, revealable: boolean): KeyView {
  return {
    id: k.id,
    name: k.name,
    instance: k.instance,
    status: k.status,
    hint: k.hint,
    isDefault: k.isDefault,
    createdAt: k.createdAt,
    lastUsedAt: k.lastUsedAt,
    revokedAt: k.revokedAt,
    revokeReason: k.revokeReason,
    ...(k.status === 'active' && k.revokeAt != null ? { revokeAt: k.revokeAt } : {}),
    // A copy to the split too: the request path changes the key's in place.
    usage: { ...k.usage, byRoute: addByRoute({}, k.usage.byRoute) },
    limits: { ...k.limits },
    revealable,
  };
}

/** A page of `GET /v1/keys?limit=…`: `next` is the `after` of the next page (null: the last). */
export interface KeyPageView {
  keys: KeyView[];
  next: string | null;
}

/** A page of `GET /v1/revocations?limit=…`. */
export interface RevocationPageView {
  revocations: RevocationView[];
  next: string | null;
}

/** A revoked key's revocation, from its own record (its audit event may be archived). */
export function revocationOfKey(k: KeyRecord): RevocationView | null {
  if (k.status !== 'revoked') return null;
  return {
    keyId: k.id,
    name: k.name,
    instance: k.instance,
    revokedAt: k.revokedAt ?? k.createdAt,
    reason: k.revokeReason ?? 'manual',
  };
}
