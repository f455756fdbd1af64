import { type KeyRecord, emptyUsage, noLimits } from '../../src/domain/key.js';

/** An active key of instance i1 (deployment d1) with no usage and no limits; `over` changes any field. */
export function keyRecord(id: string, over: Partial<KeyRecord> = {}): KeyRecord {
  return {
    id,
    name: id,
    instance: 'i1',
    deployment: 'd1',
    hash: `hash-${id}`,
    hint: 'ob_sk_…abcd',
    isDefault: false,
    status: 'active',
    createdAt: '2026-11-24T00:00:00.000Z',
    lastUsedAt: null,
    revokedAt: null,
    revokeReason: null,
    usage: emptyUsage(),
    limits: noLimits(),
    ...over,
  };
}
