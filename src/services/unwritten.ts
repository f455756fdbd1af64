import type { RevokeReason } from '../domain/key.js';
import { ObProxyError } from '../errors.js';
import type { Mutation } from '../store/store.js';

export interface UnwrittenRevocation {
  keyId: string;
  instance: string;
  reason: RevokeReason | null;
  /** In the revocation journal: it holds after a restart although db.json lacks it. */
  journaled: boolean;
}

export interface UnwrittenChanges {
  revocations: UnwrittenRevocation[];
  /** Instance state changes and removals db.json lacks: lost at a restart. */
  instances: { id: string; state: string }[];
  /** Everything else (usage counters, audit events of the above). */
  other: number;
}

/** The key ids whose revocation a batch of mutations carries. */
export function revokedKeyIds(mutations: readonly Mutation[]): string[] {
  return [...new Set(mutations.flatMap((m) => (m.op === 'putKey' && m.key.status === 'revoked' ? [m.key.id] : [])))];
}

/** What a batch that could not be written holds, the latest mutation per record winning. */
export function summariseUnwritten(
  mutations: readonly Mutation[],
  durable: (keyId: string) => boolean,
): UnwrittenChanges {
  const keys = new Map<string, UnwrittenRevocation>();
  const instances = new Map<string, string>();
  let other = 0;
  for (const m of mutations) {
    if (m.op === 'putKey' && m.key.status === 'revoked') {
      keys.set(m.key.id, {
        keyId: m.key.id,
        instance: m.key.instance,
        reason: m.key.revokeReason,
        journaled: durable(m.key.id),
      });
    } else if (m.op === 'putInstance') {
      instances.set(m.instance.id, m.instance.state);
    } else if (m.op === 'deleteInstance') {
      instances.set(m.id, 'removed');
    } else {
      other++;
    }
  }
  return { revocations: [...keys.values()], instances: [...instances].map(([id, state]) => ({ id, state })), other };
}

const AGAIN: Record<string, string> = { stopped: 'stop', failed: 'fail', terminated: 'terminate', removed: 'remove' };

/**
 * Thrown by LifecycleService.close() when the last write failed: says exactly what the store
 * file lacks, which of it survives a restart anyway, and what to do about the rest.
 */
export class UnwrittenAtShutdownError extends ObProxyError {
  constructor(
    readonly unwritten: UnwrittenChanges,
    cause: unknown,
  ) {
    const parts: string[] = [`The store could not be written at shutdown (${(cause as Error).message})`];
    const kept = unwritten.revocations.filter((r) => r.journaled);
    const lost = unwritten.revocations.filter((r) => !r.journaled);
    const name = (r: UnwrittenRevocation): string => `${r.keyId} (instance ${r.instance}, ${r.reason ?? 'revoked'})`;
    if (kept.length > 0)
      parts.push(
        `Revocations in the revocation journal, applied again at the next start: ${kept.map(name).join(', ')}.`,
      );
    if (lost.length > 0) {
      parts.push(
        `Revocations NOT recorded anywhere, so these keys are active again after a restart: ${lost.map(name).join(', ')}; revoke them again once the store is writable (ob-proxy keys revoke <key-id>).`,
      );
    }
    if (unwritten.instances.length > 0) {
      const cmds = unwritten.instances.map((i) =>
        AGAIN[i.state] === undefined
          ? `${i.id} → ${i.state}`
          : `${i.id} → ${i.state} (ob-proxy instances ${AGAIN[i.state]} ${i.id})`,
      );
      parts.push(`Instance changes lost; repeat them after the restart: ${cmds.join(', ')}.`);
    }
    if (unwritten.other > 0)
      parts.push(`Also lost: ${unwritten.other} other change(s) (usage counters, audit events).`);
    super('store_write_failed', { message: parts.join(' '), cause });
    this.name = 'UnwrittenAtShutdownError';
  }
}
