import { type KeyRecord } from '../../domain/key.js';
import { obError } from '../../errors.js';
import { type Mutation } from '../../store/store.js';
import { isLive } from '../registry.js';

import { type CreatedKey } from './commit-protocol.js';
import { InstanceCommands } from './instance-commands.js';

/** The longest grace a rotation may give the old key: past it, a rotation is a second key. */
export const ROTATION_GRACE_MAX_MS = 30 * 86_400_000;

export interface RotatedKey extends CreatedKey {
  /** The key it replaces, with its revocation planned (`revokeAt`) or made. */
  old: KeyRecord;
}

/**
 * A key replaced by a new one with the same name and limits: the new key and the old key's
 * planned revocation are written in one commit (with `key.created` and `key.rotated`), so a
 * restart finds either both or neither. At the end of the grace the old key is revoked (reason
 * rotated), by the daemon's pack timer (endDuePacks) or at its next start; the request path
 * refuses it from then on whether or not that write has happened (Registry.check), so it never
 * serves again.
 */
export class KeyRotation extends InstanceCommands {
  rotateKey(keyId: string, graceMs: unknown): Promise<RotatedKey> {
    return this.fresh(async () => {
      if (
        typeof graceMs !== 'number' ||
        !Number.isSafeInteger(graceMs) ||
        graceMs < 0 ||
        graceMs > ROTATION_GRACE_MAX_MS
      )
        throw obError('invalid_argument', {
          param: 'graceSeconds',
          message: `The grace must be a duration from 0 to 30 days.`,
        });
      const old = this.getKey(keyId);
      if (old.status === 'revoked')
        throw obError('key_revoked', {
          message: `Key ${keyId} was revoked at ${old.revokedAt} (${old.revokeReason}); a revoked key is not rotated. Create a new key with \`ob-proxy keys create\`.`,
        });
      if (old.revokeAt != null)
        throw obError('key_revoked', {
          message: `Key ${keyId} was already rotated: it is revoked at ${old.revokeAt}. Rotate the key that replaced it instead (\`ob-proxy keys list --instance ${old.instance}\`).`,
        });
      const inst = this.getInstance(old.instance);
      if (inst.deployment !== old.deployment || inst.state !== 'ready')
        throw obError('instance_not_ready', {
          message: `Instance "${old.instance}" is ${inst.deployment !== old.deployment ? 'another deployment now' : inst.state}; a key can be rotated only while its instance is ready.`,
        });
      const created = this.newKey(inst, old.name, old.isDefault, { ...old.limits });
      const at = new Date(this.deps.clock.now() + graceMs).toISOString();
      const rotated = this.event({
        type: 'key.rotated',
        instance: old.instance,
        keyId,
        keyName: old.name,
        newKeyId: created.key.id,
        revokeAt: at,
      });
      const mutations: Mutation[] = [
        { op: 'putKey', key: created.key },
        { op: 'scheduleRevocation', keyId, at },
      ];
      await this.write([
        ...mutations,
        { op: 'appendEvent', event: created.event },
        { op: 'appendEvent', event: rotated },
      ]);
      for (const m of mutations) this.applyState(m);
      this.emit([created.event, rotated]);
      // No grace: revoked now, in memory first. Were this write to fail, the planned revocation
      // is written already, and is due.
      if (graceMs === 0) await this.revokeLocked([old], 'rotated');
      return { key: this.reg.keys.get(created.key.id) as KeyRecord, secret: created.secret, old };
    });
  }

  /**
   * Revokes every key whose rotation's grace has ended, under the mutex (endDuePacks calls it).
   * On a shared store the daemon doing the chores does it for all; the others refuse the keys
   * from their revokeAt meanwhile and hear the revocations.
   */
  protected async revokeDueRotations(): Promise<KeyRecord[]> {
    if (this.deps.store.holdsChores?.() === false) return [];
    const now = this.deps.clock.now();
    const due = [...this.rotating()].filter((k) => Date.parse(k.revokeAt as string) <= now);
    if (due.length > 0) await this.revokeLocked(due, 'rotated');
    return due;
  }

  /** The earliest end of a rotation's grace still to come, for the daemon's timer. */
  protected nextRotationEnd(): number | null {
    let next: number | null = null;
    for (const k of this.rotating()) {
      const t = Date.parse(k.revokeAt as string);
      if (next === null || t < next) next = t;
    }
    return next;
  }

  private *rotating(): Iterable<KeyRecord> {
    // The keys with a grace, not every key of every live instance: at each pack timer tick.
    for (const k of [...this.reg.rotatingKeys()]) {
      const inst = this.reg.instances.get(k.instance);
      if (inst !== undefined && isLive(inst) && inst.deployment === k.deployment) yield k;
    }
  }
}
