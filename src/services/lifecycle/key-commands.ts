import { mintSecret } from '../../domain/api-key.js';
import { keyIdInSecret, looksLikeSecret } from '../../domain/secret-shape.js';
import { clipped } from '../../printable.js';
import { type Instance } from '../../domain/instance.js';
import {
  type AuditEvent,
  type KeyLimits,
  type KeyRecord,
  type RevokeReason,
  emptyUsage,
  noLimits,
} from '../../domain/key.js';
import { type Mutation } from '../../store/store.js';
import { validateKeyName, validateLimits } from '../../domain/validate.js';
import { ObProxyError, obError } from '../../errors.js';

import { type CreatedKey } from './commit-protocol.js';
import { LifecycleReplica } from './replication.js';

/** Keys made, limited, revealed and revoked, and the secrets not yet shown. */
export class KeyCommands extends LifecycleReplica {
  createKey(instanceId: string, name: unknown, limits?: unknown): Promise<CreatedKey> {
    return this.fresh(async () => {
      const keyName = validateKeyName(name);
      const keyLimits = validateLimits(limits, noLimits());
      const inst = this.getInstance(instanceId);
      if (inst.state !== 'ready') {
        throw obError('instance_not_ready', {
          message: `Instance "${instanceId}" is ${inst.state}; keys can be created only for a ready instance.`,
        });
      }
      return this.mintKey(inst, keyName, false, keyLimits);
    });
  }

  /**
   * Changes a key's limits: each of `patch`'s fields absent (kept), null (none) or a number.
   * Written before it applies, like a creation; then the request path sees it at once, since
   * it reads the limits from the registry's record of the key.
   */
  setKeyLimits(keyId: string, patch: unknown): Promise<KeyRecord> {
    return this.fresh(async () => {
      const key = this.getKey(keyId);
      if (key.status === 'revoked')
        throw obError('key_revoked', {
          message: `Key ${keyId} was revoked at ${key.revokedAt} (${key.revokeReason}); its limits no longer matter.`,
        });
      const limits: KeyLimits = validateLimits(patch, key.limits);
      await this.commit(
        [{ op: 'setKeyLimits', keyId, limits }],
        this.event({ type: 'key.limited', instance: key.instance, keyId, keyName: key.name, limits: { ...limits } }),
      );
      return key;
    });
  }

  protected async mintKey(
    inst: Instance,
    name: string,
    isDefault: boolean,
    limits: KeyLimits = noLimits(),
  ): Promise<CreatedKey> {
    const { key, secret, event } = this.newKey(inst, name, isDefault, limits);
    await this.commit([{ op: 'putKey', key }], event);
    return { key: this.reg.keys.get(key.id) as KeyRecord, secret };
  }

  /** A key record, its secret and its `key.created` event, nothing written or applied. */
  protected newKey(
    inst: Instance,
    name: string,
    isDefault: boolean,
    limits: KeyLimits,
  ): CreatedKey & { event: AuditEvent } {
    let minted = mintSecret(this.deps.secrets);
    while (this.reg.keys.has(minted.keyId)) minted = mintSecret(this.deps.secrets);
    const key: KeyRecord = {
      id: minted.keyId,
      name,
      instance: inst.id,
      deployment: inst.deployment,
      hash: minted.hash,
      hint: minted.hint,
      isDefault,
      status: 'active',
      createdAt: this.now(),
      lastUsedAt: null,
      revokedAt: null,
      revokeReason: null,
      usage: emptyUsage(),
      limits,
    };
    // Limits given at creation are in the trail too: with key.limited, their whole history.
    const limited = limits.rpm !== null || limits.tpm !== null || limits.concurrency !== null;
    const event = this.event({
      type: 'key.created',
      instance: inst.id,
      keyId: key.id,
      keyName: name,
      ...(limited ? { limits: { ...limits } } : {}),
    });
    return { key, secret: minted.secret, event };
  }

  getKey(keyId: string): KeyRecord {
    const key = this.reg.keys.get(keyId);
    if (key === undefined) throw keyNotFound(keyId);
    return key;
  }

  revokeKey(keyId: string): Promise<KeyRecord> {
    return this.fresh(async () => {
      const key = this.getKey(keyId);
      if (key.status === 'revoked')
        throw obError('key_revoked', {
          message: `Key ${keyId} was already revoked at ${key.revokedAt} (${key.revokeReason}).`,
        });
      await this.revokeLocked([key], 'manual');
      return key;
    });
  }

  /** Active keys revoked in memory at once, then written (writeRevocations), under the mutex. */
  protected async revokeLocked(keys: readonly KeyRecord[], reason: RevokeReason): Promise<void> {
    const mutations: Mutation[] = [];
    const events: AuditEvent[] = [];
    for (const key of keys) {
      this.reg.revoke(key, this.now(), reason);
      this.undisplayed.drop([key]);
      const ev = this.event({ type: 'key.revoked', instance: key.instance, keyId: key.id, keyName: key.name, reason });
      mutations.push({ op: 'putKey', key: { ...key } }, { op: 'appendEvent', event: ev });
      events.push(ev);
    }
    await this.writeRevocations(mutations, events);
  }

  /** Hands out an undisplayed default secret once; null if already shown. */
  claimSecret(keyId: string): string | null {
    return this.undisplayed.claim(keyId);
  }

  /**
   * Keeps a new key's secret for one `keys reveal`: its creator went away before it could be
   * shown (a CLI given up on, a console closed), and the key it made would otherwise be active
   * with a secret nobody ever saw.
   */
  keepUndisplayed(created: CreatedKey): void {
    if (created.key.status === 'active') this.undisplayed.keep(created.key.id, created.secret);
  }

  hasUndisplayedSecret(keyId: string): boolean {
    return this.undisplayed.has(keyId);
  }

  revealKey(keyId: string): Promise<CreatedKey> {
    return this.mutex.run(async () => {
      const key = this.getKey(keyId);
      if (key.status !== 'active' || !this.undisplayed.has(keyId)) {
        throw obError('reveal_refused', {
          message: `The secret of key ${keyId} cannot be shown: it was already displayed${key.status === 'revoked' ? ' and the key is revoked' : ''}, or the daemon restarted since it was made. Create a new key with \`ob-proxy keys create\`.`,
        });
      }
      await this.commit([], this.event({ type: 'key.revealed', instance: key.instance, keyId, keyName: key.name }));
      return { key, secret: this.undisplayed.claim(keyId) as string };
    });
  }
}

/**
 * A key asked for by an id it does not have. A secret given for the id is not said back (the
 * refusal reaches terminals and scripts' logs): the message names the id it holds instead, or,
 * for one changed on the way (upper-cased, cut), only says what it looks like.
 */
export function keyNotFound(given: string, plain = `No key "${clipped(given)}".`): ObProxyError {
  const id = keyIdInSecret(given);
  const list = 'list keys with `ob-proxy keys list`.';
  return obError('key_not_found', {
    message:
      id !== null
        ? `That is a key's secret, not its id. A key is named by its id, the 12 characters after ob_sk_ (here ${id}); ${list}`
        : looksLikeSecret(given)
          ? `That looks like a key's secret (it holds ob_sk_ in some case), not a key id, and is not said back. A key is named by its id, the 12 characters after ob_sk_ exactly as the key has them; ${list}`
          : `${plain} List keys with \`ob-proxy keys list\`.`,
  });
}
