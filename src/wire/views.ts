import type { Instance } from '../domain/instance.js';
import type { AuditEvent, KeyLimits, KeyRecord, KeyUsage, RevokeReason } from '../domain/key.js';
import type { HealthView } from '../services/instance-health.js';

/** CONTRACT §2 JSON shapes. Built field by field so no store-only field (hash) can leak. */
export interface InstanceView {
  id: string;
  model: string;
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
  usage: KeyUsage;
  /** Per-key limits (null: none), enforced by each daemon. */
  limits: KeyLimits;
  /** True while a default key's secret was never displayed and can be revealed once. */
  revealable: boolean;
}

export interface RevocationView {
  keyId: string;
  name: string;
  instance: string;
  revokedAt: string;
  reason: RevokeReason;
}

export interface KeyWithSecret extends KeyView {
  secret: string;
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
}

export function instanceView(i: Instance, activeKeys: number, health: HealthView | null = null): InstanceView {
  return {
    id: i.id, model: i.model, endpoint: i.endpoint, state: i.state, packEndsAt: i.packEndsAt,
    upstreamTokenFile: i.upstreamTokenFile ?? null, activeKeys, createdAt: i.createdAt, updatedAt: i.updatedAt,
    health: health === null ? null : { ...health },
  };
}

export function keyView(k: KeyRecord, revealable: boolean): KeyView {
  return {
    id: k.id, name: k.name, instance: k.instance, status: k.status, hint: k.hint, isDefault: k.isDefault,
    createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, revokedAt: k.revokedAt, revokeReason: k.revokeReason,
    usage: { ...k.usage }, limits: { ...k.limits }, revealable,
  };
}

export function revocationView(e: AuditEvent): RevocationView | null {
  if (e.type !== 'key.revoked' || e.keyId === undefined || e.reason === undefined) return null;
  return { keyId: e.keyId, name: e.keyName ?? '', instance: e.instance, revokedAt: e.at, reason: e.reason };
}

/** What the live event stream carries: the audit event, never a secret. */
export type LiveEvent = AuditEvent;
