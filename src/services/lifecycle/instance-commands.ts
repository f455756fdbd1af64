import { randomUUID } from 'node:crypto';
import { clipped } from '../../printable.js';
import {
  type AliasChange,
  type Instance,
  type InstanceState,
  REVOKING_ACTIONS,
  assertTransition,
  changeAliases,
  normalizeEndpoint,
} from '../../domain/instance.js';
import { type AuditEvent, type KeyRecord, type RevokeReason } from '../../domain/key.js';
import { isModelId } from '../../domain/model-id.js';
import { validateInstanceId, validateTimestamp, validateTokenFile } from '../../domain/validate.js';
import { obError } from '../../errors.js';
import { type Mutation } from '../../store/store.js';
import { isLive } from '../registry.js';

import { DEFAULT_KEY_NAME, type ReadyResult } from './commit-protocol.js';
import { KeyCommands } from './key-commands.js';

/** An instance's life: added, made ready (with its default key), moved, extended, halted, removed. */
export class InstanceCommands extends KeyCommands {
  addInstance(input: {
    id: unknown;
    model: unknown;
    endpoint?: unknown;
    packEndsAt?: unknown;
    upstreamTokenFile?: unknown;
  }): Promise<Instance> {
    return this.fresh(async () => {
      const id = validateInstanceId(input.id);
      const allowed = this.allowedModels;
      if (typeof input.model !== 'string' || !allowed.includes(input.model)) {
        const model = clipped(String(input.model));
        throw obError('unknown_model', {
          param: 'model',
          message: `Model "${model}" is not allowed: the allowed models are ${allowed.join(', ')}. Allow it first with \`ob-proxy models allow ${isModelId(input.model) && model === input.model ? model : 'MODEL'}\`.`,
        });
      }
      if (this.reg.instances.has(id))
        throw obError('instance_exists', {
          message: `Instance "${id}" already exists; pick another id or remove it first.`,
        });
      const endpoint = input.endpoint == null ? null : normalizeEndpoint(String(input.endpoint));
      const packEndsAt = input.packEndsAt == null ? null : this.futureTime(input.packEndsAt);
      const now = this.now();
      const upstreamTokenFile = input.upstreamTokenFile == null ? null : validateTokenFile(input.upstreamTokenFile);
      const deployment = (this.deps.deploymentId ?? randomUUID)();
      const instance: Instance = {
        id,
        deployment,
        model: input.model,
        endpoint,
        state: 'pending',
        packEndsAt,
        upstreamTokenFile,
        aliases: [],
        createdAt: now,
        updatedAt: now,
      };
      await this.commit(
        [{ op: 'putInstance', instance }],
        this.event({ type: 'instance.added', instance: id, state: 'pending', packEndsAt }),
      );
      return instance;
    });
  }

  protected futureTime(value: unknown): string {
    const at = validateTimestamp(value, 'packEndsAt');
    if (Date.parse(at) <= this.deps.clock.now()) {
      throw obError('invalid_argument', { param: 'packEndsAt', message: `packEndsAt ${at} is not in the future.` });
    }
    return at;
  }

  /** Moves to ready; the default key is made in the background (docs/contract.md §2.4). */
  async ready(id: string, options: { endpoint?: unknown; upstreamTokenFile?: unknown } = {}): Promise<ReadyResult> {
    const instance = await this.fresh(async () => {
      const inst = this.getInstance(id);
      assertTransition(inst, 'ready');
      const endpoint = options.endpoint == null ? inst.endpoint : normalizeEndpoint(String(options.endpoint));
      if (endpoint === null) {
        throw obError('invalid_argument', {
          param: 'endpoint',
          message: `Instance "${id}" has no endpoint: give --endpoint URL (the model server's base URL).`,
        });
      }
      if (inst.packEndsAt !== null && Date.parse(inst.packEndsAt) <= this.deps.clock.now()) {
        throw obError('invalid_transition', {
          message: `The pack of "${id}" has ended; extend it before making it ready.`,
        });
      }
      const upstreamTokenFile =
        options.upstreamTokenFile == null
          ? (inst.upstreamTokenFile ?? null)
          : validateTokenFile(options.upstreamTokenFile);
      return this.moveTo(inst, 'ready', { endpoint, upstreamTokenFile });
    });
    const defaultKey = this.scheduleDefaultKey(id);
    return { instance, defaultKey };
  }

  protected scheduleDefaultKey(id: string): Promise<KeyRecord | null> {
    const existing = this.inflightDefaults.get(id);
    if (existing !== undefined) return existing;
    const p = new Promise<KeyRecord | null>((resolve, reject) => {
      setImmediate(() => {
        this.mutex
          .run(async () => {
            const inst = this.reg.instances.get(id);
            if (inst === undefined || inst.state !== 'ready') return null;
            const hasDefault = this.reg.keysOfDeployment(inst).some((k) => k.isDefault && k.status === 'active');
            if (hasDefault) return null;
            const created = await this.mintKey(inst, DEFAULT_KEY_NAME, true);
            this.undisplayed.keep(created.key.id, created.secret);
            return created.key;
          })
          .then(resolve, reject)
          .finally(() => this.inflightDefaults.delete(id));
      });
    });
    this.inflightDefaults.set(id, p);
    return p;
  }

  pending(id: string): Promise<Instance> {
    return this.fresh(async () => {
      const inst = this.getInstance(id);
      assertTransition(inst, 'pending');
      return this.moveTo(inst, 'pending', {});
    });
  }

  /** stop / fail / terminate: every key is revoked, durably, before this resolves. */
  halt(id: string, action: 'stop' | 'fail' | 'terminate'): Promise<Instance> {
    return this.fresh(async () => {
      const inst = this.getInstance(id);
      const next = assertTransition(inst, action);
      return this.haltLocked(inst, next, REVOKING_ACTIONS[action]);
    });
  }

  protected async haltLocked(inst: Instance, next: InstanceState, reason: RevokeReason): Promise<Instance> {
    const updated: Instance = { ...inst, state: next, updatedAt: this.now() };
    const { mutations, events } = this.revokeAllInMemory(inst.id, reason);
    const ev = this.event({ type: 'instance.state', instance: inst.id, state: next, reason });
    this.reg.putInstance(updated);
    this.undisplayed.drop(this.reg.keysOf(inst.id));
    await this.writeRevocations(
      [...mutations, { op: 'putInstance', instance: updated, prev: inst }, { op: 'appendEvent', event: ev }],
      [...events, ev],
    );
    return updated;
  }

  /** Revocations take effect at once in memory; the write follows. */
  protected revokeAllInMemory(
    instanceId: string,
    reason: RevokeReason,
  ): { mutations: Mutation[]; events: AuditEvent[] } {
    const now = this.now();
    const r = this.revocationsOf(instanceId, reason, now);
    for (const key of r.keys) this.reg.revoke(key, now, reason);
    return r;
  }

  /**
   * The writes and audit events that revoke every active key of an instance, nothing applied:
   * a halt applies them in memory first (revokeAllInMemory), a pack end only once its conditional
   * write went through (endPack).
   */
  protected revocationsOf(
    instanceId: string,
    reason: RevokeReason,
    now: string,
  ): { keys: KeyRecord[]; mutations: Mutation[]; events: AuditEvent[] } {
    const keys: KeyRecord[] = [];
    const mutations: Mutation[] = [];
    const events: AuditEvent[] = [];
    for (const key of this.reg.keysOf(instanceId)) {
      if (key.status !== 'active') continue;
      const ev = this.event({ type: 'key.revoked', instance: instanceId, keyId: key.id, keyName: key.name, reason });
      keys.push(key);
      mutations.push(
        { op: 'putKey', key: { ...key, status: 'revoked', revokedAt: now, revokeReason: reason } },
        { op: 'appendEvent', event: ev },
      );
      events.push(ev);
    }
    return { keys, mutations, events };
  }

  protected async moveTo(inst: Instance, next: InstanceState, patch: Partial<Instance>): Promise<Instance> {
    const updated: Instance = { ...inst, ...patch, state: next, updatedAt: this.now() };
    await this.commit(
      [{ op: 'putInstance', instance: updated, prev: inst }],
      this.event({ type: 'instance.state', instance: inst.id, state: next }),
    );
    return updated;
  }

  /** `shorten`: an end sooner than the current one is meant (refused otherwise, see below). */
  extend(id: string, packEndsAt: unknown, options: { shorten?: boolean } = {}): Promise<Instance> {
    return this.fresh(async () => {
      const inst = this.getInstance(id);
      if (!isLive(inst)) {
        throw obError('invalid_transition', {
          message: `Instance "${id}" is ${inst.state}; only a pending or ready instance's pack can be extended.`,
        });
      }
      const at = this.futureTime(packEndsAt);
      if (inst.packEndsAt !== null && Date.parse(inst.packEndsAt) <= this.deps.clock.now()) {
        throw obError('invalid_transition', {
          message: `The pack of "${id}" has already ended; its keys are revoked.`,
        });
      }
      // An end sooner than the one paid for is no extension: at that moment every key of the
      // instance is revoked for ever. `--pack-ends +8h` is 8 hours from now, not 8 more hours,
      // so this is an easy slip to make on a pack that still has days to run.
      if (options.shorten !== true && inst.packEndsAt !== null && Date.parse(at) < Date.parse(inst.packEndsAt)) {
        throw obError('invalid_argument', {
          param: 'packEndsAt',
          message: `The pack of "${id}" already ends at ${inst.packEndsAt}; ${at} is sooner, and every key of it would be revoked then. A duration such as +30d counts from now: give a time after ${inst.packEndsAt}, or add --shorten to end the pack sooner on purpose.`,
        });
      }
      const updated: Instance = { ...inst, packEndsAt: at, updatedAt: this.now() };
      await this.commit(
        [{ op: 'putInstance', instance: updated, prev: inst }],
        this.event({ type: 'instance.extended', instance: id, packEndsAt: at }),
      );
      return updated;
    });
  }

  /**
   * Changes the other model ids its keys may send (domain/instance.ts changeAliases says how). On
   * any instance but a terminated one: a stopped instance made ready again keeps them. A change
   * that leaves them as they are writes nothing.
   */
  alias(id: string, change: AliasChange): Promise<Instance> {
    return this.fresh(async () => {
      const inst = this.getInstance(id);
      if (inst.state === 'terminated') {
        throw obError('invalid_transition', {
          message: `Instance "${id}" is terminated; its aliases can no longer change. Add a new instance to serve under them.`,
        });
      }
      const aliases = changeAliases(inst, change);
      if (aliases.length === inst.aliases.length && aliases.every((a, i) => a === inst.aliases[i])) return inst;
      const updated: Instance = { ...inst, aliases, updatedAt: this.now() };
      await this.commit(
        [{ op: 'putInstance', instance: updated, prev: inst }],
        this.event({ type: 'instance.aliased', instance: id, aliases: [...aliases] }),
      );
      return updated;
    });
  }

  /**
   * Revokes every key of the instance, then forgets it. Its keys answer 404 for ever: an instance
   * added later with the same id is another deployment (a new internal id), with new keys.
   */
  remove(id: string): Promise<Instance> {
    return this.fresh(async () => {
      const inst = this.getInstance(id);
      const { mutations, events } = this.revokeAllInMemory(id, 'instance_removed');
      const ev = this.event({ type: 'instance.removed', instance: id, state: inst.state });
      this.reg.deleteInstance(id);
      this.undisplayed.drop(this.reg.keysOf(id));
      await this.writeRevocations(
        [...mutations, { op: 'deleteInstance', id, deployment: inst.deployment }, { op: 'appendEvent', event: ev }],
        [...events, ev],
      );
      return inst;
    });
  }
}
