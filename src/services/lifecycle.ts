import { randomUUID } from 'node:crypto';
import { type Clock, iso } from '../clock.js';
import { mintSecret, type SecretSource } from '../domain/api-key.js';
import { keyIdInSecret, looksLikeSecret } from '../domain/secret-shape.js';
import { clipped } from '../printable.js';
import {
  type Instance,
  type InstanceAction,
  type InstanceState,
  REVOKING_ACTIONS,
  assertTransition,
  normalizeEndpoint,
} from '../domain/instance.js';
import {
  type AuditEvent,
  type KeyLimits,
  type KeyRecord,
  type RevokeReason,
  emptyUsage,
  noLimits,
} from '../domain/key.js';
import {
  validateInstanceId,
  validateKeyName,
  validateLimits,
  validateTimestamp,
  validateTokenFile,
} from '../domain/validate.js';
import { ObProxyError, obError } from '../errors.js';
import {
  STORE_VERSION,
  type Mutation,
  type Store,
  type StoreChange,
  type StoreData,
  type UsageDelta,
} from '../store/store.js';
import { upgradeStoreData } from '../store/upgrade.js';
import { Mutex } from './mutex.js';
import { UndisplayedSecrets } from './default-secrets.js';
import { type KeyCounters, MutableRegistry, type Registry, isLive } from './registry.js';
import { UnwrittenAtShutdownError, revokedKeyIds, summariseUnwritten } from './unwritten.js';

export interface LifecycleDeps {
  store: Store;
  clock: Clock;
  secrets: SecretSource;
  models: readonly string[];
  /** Internal deployment ids (never reused); random UUIDs unless a test injects its own. */
  deploymentId?: () => string;
}

export interface CreatedKey {
  key: KeyRecord;
  secret: string;
}

export interface ReadyResult {
  instance: Instance;
  /** Resolves once the background default key exists (null when the instance kept an active one). */
  defaultKey: Promise<KeyRecord | null>;
}

/** `origin` says whether the change was made through this daemon or heard from a shared store. */
export type ChangeListener = (event: AuditEvent, origin: 'local' | 'remote') => void;

export const DEFAULT_KEY_NAME = 'default';

/**
 * Every change to instances and keys goes through here, one at a time (a mutex), and is durable
 * before it is acknowledged. Creations are written first and then become usable; revocations
 * take effect in memory first and are then written, so a failed write can lose a creation the
 * caller never saw, but can never leave a revoked key usable in this process.
 */
export class LifecycleService {
  private readonly reg: MutableRegistry;
  private readonly mutex = new Mutex();
  private readonly listeners = new Set<ChangeListener>();
  private readonly undisplayed = new UndisplayedSecrets();
  /** Mutations applied in memory whose write failed; written with the next commit. */
  private unwritten: Mutation[] = [];
  /** Why the last write failed (null: it did not). */
  private unwrittenWhy: string | null = null;
  private readonly inflightDefaults = new Map<string, Promise<KeyRecord | null>>();

  constructor(
    private readonly deps: LifecycleDeps,
    registry: MutableRegistry,
  ) {
    this.reg = registry;
  }

  /** The registry as everyone else sees it: read only. */
  get registry(): Registry {
    return this.reg;
  }

  /** The request path's usage counting, the one change to the registry made outside this class. */
  get usageCounters(): KeyCounters {
    return this.reg;
  }

  static async open(deps: LifecycleDeps): Promise<LifecycleService> {
    const upgraded = upgradeStoreData(await deps.store.load(), {
      newId: deps.deploymentId ?? randomUUID,
      now: iso(deps.clock.now()),
    });
    // Written before the daemon serves: an old store's keys of removed deployments stay revoked.
    if (upgraded.mutations.length > 0) await deps.store.commit(upgraded.mutations);
    const lc = new LifecycleService(deps, MutableRegistry.from(upgraded.data));
    // A shared store: what other daemons change reaches this registry, and this daemon's listeners.
    deps.store.subscribe?.({ changes: (c) => lc.applyRemote(c), reload: (d) => lc.applySnapshot(d) });
    return lc;
  }

  get models(): readonly string[] {
    return this.deps.models;
  }

  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private now(): string {
    return iso(this.deps.clock.now());
  }

  private event(partial: Omit<AuditEvent, 'seq' | 'at'>): AuditEvent {
    return { seq: this.reg.nextSeq(), at: this.now(), ...partial };
  }

  private emit(events: AuditEvent[], origin: 'local' | 'remote' = 'local'): void {
    for (const e of events) {
      this.reg.addEvent(e);
      for (const l of this.listeners) l(e, origin);
    }
  }

  /**
   * Changes heard from a shared store, made through other daemons (or by the store itself, such
   * as a key another daemon created while this one stopped its instance, revoked with the rest).
   * Applied under the same mutex as local changes, state first and then the events, so that a
   * listener (ending in-flight work of a revoked key, the console's live events) sees the state
   * its event describes. Records the request path holds are updated in place: a key revoked
   * elsewhere is refused by the very object a request in flight checks again.
   */
  applyRemote(changes: readonly StoreChange[]): Promise<void> {
    // Revocations take effect now, not after the mutex: a change of this daemon's waiting on the
    // store (behind a lock held in the database) must not keep a key revoked elsewhere served.
    for (const c of changes)
      for (const m of c.mutations) if (m.op === 'putKey' && m.key.status === 'revoked') this.revokeKnown(m.key);
    return this.mutex.run(async () => {
      const events: AuditEvent[] = [];
      for (const c of changes) {
        for (const m of c.mutations) {
          if (m.op === 'appendEvent') events.push(m.event);
          else this.applyState(m);
        }
      }
      this.emit(
        events.sort((a, b) => a.seq - b.seq),
        'remote',
      );
    });
  }

  /** The whole state again (a shared store found a gap in what this daemon heard). */
  applySnapshot(data: StoreData): Promise<void> {
    return this.mutex.run(async () => {
      const ids = new Set(data.instances.map((i) => i.id));
      for (const id of [...this.reg.instances.keys()]) if (!ids.has(id)) this.applyState({ op: 'deleteInstance', id });
      for (const instance of data.instances) this.applyState({ op: 'putInstance', instance });
      for (const key of data.keys) {
        this.applyState({ op: 'putKey', key });
        const known = this.reg.keys.get(key.id);
        if (known !== undefined) this.reg.resetFromStore(known, key);
      }
      const seen = new Set(this.reg.events.map((e) => e.seq));
      this.emit(
        data.events.filter((e) => !seen.has(e.seq)).sort((a, b) => a.seq - b.seq),
        'remote',
      );
    });
  }

  /**
   * A mutation as the registry takes it: the same for a change made here (after it is written)
   * and one heard from a shared store. Records are copied in, so nothing a store keeps is shared
   * with the request path.
   */
  private applyState(m: Mutation): void {
    switch (m.op) {
      case 'putInstance': {
        const inst = structuredClone(m.instance);
        this.reg.putInstance(inst);
        if (!isLive(inst)) this.undisplayed.drop(this.reg.keysOf(inst.id));
        break;
      }
      case 'deleteInstance':
        this.reg.deleteInstance(m.id);
        this.undisplayed.drop(this.reg.keysOf(m.id));
        break;
      case 'putKey': {
        if (!this.reg.keys.has(m.key.id)) this.reg.putKey(structuredClone(m.key));
        else if (m.key.status === 'revoked') this.revokeKnown(m.key);
        break;
      }
      case 'setKeyLimits': {
        // In place: requests in flight read the limits from this very record.
        const key = this.reg.keys.get(m.keyId);
        if (key !== undefined) this.reg.setLimits(key, m.limits);
        break;
      }
      case 'addUsage': {
        const key = this.reg.keys.get(m.keyId);
        if (key !== undefined) this.reg.addStoredUsage(key, m);
        break;
      }
      case 'appendEvent':
        break;
    }
  }

  /** A key this daemon knows, revoked as a revocation heard says (in place: requests hold the record). */
  private revokeKnown(key: KeyRecord): void {
    const known = this.reg.keys.get(key.id);
    if (known === undefined || known.status !== 'active') return;
    this.reg.revoke(known, key.revokedAt, key.revokeReason);
    this.undisplayed.drop([known]);
  }

  /** Writes mutations, after any that failed to be written before. */
  private async write(mutations: Mutation[]): Promise<void> {
    const batch = [...this.unwritten, ...mutations];
    try {
      await this.deps.store.commit(batch);
    } catch (err) {
      this.unwrittenWhy = (err as Error).message;
      throw err;
    }
    this.unwritten = [];
    this.unwrittenWhy = null;
  }

  /**
   * Whether the key's revocation is still to be written in full (its row and audit event),
   * and why, while a shared store already has every daemon refuse it (revokeKey succeeded).
   */
  revocationPending(keyId: string): string | null {
    const pending = this.unwritten.some((m) => m.op === 'putKey' && m.key.id === keyId);
    return pending ? this.unwrittenWhy : null;
  }

  /**
   * The one way a change that needs no effect before it is durable (a creation, a move, new
   * limits, a reveal) is made: written with its audit event, then applied to the registry as a
   * change heard from a shared store is, then told to listeners. A failed write changes nothing.
   */
  private async commit(mutations: Mutation[], event: AuditEvent): Promise<void> {
    await this.write([...mutations, { op: 'appendEvent', event }]);
    for (const m of mutations) this.applyState(m);
    this.emit([event]);
  }

  /**
   * Runs a management change under the mutex, after hearing what a shared store has that this
   * daemon has not yet: a command given right after a change through another daemon decides from
   * that change. (The store still refuses a change decided on a stale view: this only spares
   * the operator the refusal.) Nothing to hear, or a store out of reach: straight on.
   */
  private async fresh<T>(fn: () => Promise<T>): Promise<T> {
    await this.deps.store.sync?.().catch(() => {});
    return this.mutex.run(fn);
  }

  getInstance(id: string): Instance {
    const inst = this.reg.instances.get(id);
    if (inst === undefined)
      throw obError('instance_not_found', {
        message: `No instance "${clipped(id)}". List instances with \`ob-proxy instances list\`.`,
      });
    return inst;
  }

  addInstance(input: {
    id: unknown;
    model: unknown;
    endpoint?: unknown;
    packEndsAt?: unknown;
    upstreamTokenFile?: unknown;
  }): Promise<Instance> {
    return this.fresh(async () => {
      const id = validateInstanceId(input.id);
      if (typeof input.model !== 'string' || !this.deps.models.includes(input.model)) {
        throw obError('unknown_model', {
          param: 'model',
          message: `Unknown model "${clipped(String(input.model))}": use one of ${this.deps.models.join(', ')} (the operator can set OB_PROXY_MODELS).`,
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

  private futureTime(value: unknown): string {
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

  private scheduleDefaultKey(id: string): Promise<KeyRecord | null> {
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

  private async haltLocked(inst: Instance, next: InstanceState, reason: RevokeReason): Promise<Instance> {
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
  private revokeAllInMemory(instanceId: string, reason: RevokeReason): { mutations: Mutation[]; events: AuditEvent[] } {
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
  private revocationsOf(
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

  /**
   * Writes revocations already in effect in memory, and tells listeners of them whether or not the
   * write succeeds: in-flight work of those keys must end, and the console and audit trail must
   * show them (a failed write is retried with the next one).
   */
  private async writeRevocations(mutations: Mutation[], events: AuditEvent[]): Promise<void> {
    try {
      await this.write(mutations);
      this.emit(events);
    } catch (err) {
      this.unwritten.push(...mutations);
      this.emit(events);
      if (err instanceof ObProxyError) {
        const store = this.deps.store;
        const revoked = revokedKeyIds(mutations);
        // A shared store took the revocations themselves: every daemon refuses these keys. A
        // key's revocation alone is then done (revocationPending says the rest waits); an
        // instance change that did not go through is still an error.
        if (revoked.length > 0 && revoked.every((id) => store.isRevocationShared?.(id) === true)) {
          if (mutations.every((m) => m.op === 'putKey' || m.op === 'appendEvent')) return;
          throw obError('store_write_failed', {
            message: `Its keys are revoked on every daemon, but the rest of the change could not be written (${err.message}) It is retried with the next write.`,
          });
        }
        const durable = revoked.length > 0 && revoked.every((id) => store.isRevocationDurable?.(id) === true);
        const hint =
          store.subscribe === undefined
            ? '; free disk space or fix permissions'
            : ': the other daemons refuse the key once it is written';
        throw obError('store_write_failed', {
          message: durable
            ? `Revoked in the running daemon and recorded in the revocation journal, so it holds after a restart; but the store could not be written (${err.message}) The rest of the change is retried with the next write${hint}.`
            : `Revoked in the running daemon, but the store could not be written (${err.message}) The revocation is retried with the next write${hint}.`,
        });
      }
      throw err;
    }
  }

  private async moveTo(inst: Instance, next: InstanceState, patch: Partial<Instance>): Promise<Instance> {
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

  /** Ends every pack whose time has come: instance stopped, keys revoked with pack_ended. */
  async endDuePacks(): Promise<Instance[]> {
    let extendedElsewhere = false;
    const ended = await this.mutex.run(async () => {
      const ended: Instance[] = [];
      // With a shared store one daemon ends packs for all (the others refuse the keys from
      // packEndsAt meanwhile, and hear the revocations from it).
      if (this.deps.store.holdsChores?.() === false) return ended;
      const now = this.deps.clock.now();
      for (const inst of [...this.reg.instances.values()]) {
        if (inst.packEndsAt !== null && isLive(inst) && Date.parse(inst.packEndsAt) <= now) {
          const done = await this.endPack(inst);
          if (done === null) extendedElsewhere = true;
          else ended.push(done);
        }
      }
      return ended;
    });
    // Hear the extension now (it re-arms the pack timer), not at the next catch-up read.
    if (extendedElsewhere) await this.deps.store.sync?.();
    return ended;
  }

  /**
   * A shared store ends the pack only if no daemon extended it meanwhile, so nothing is revoked
   * here before it says so (the request path refuses the keys from packEndsAt anyway); it also
   * revokes keys of the deployment this daemon has not heard of yet. Null: extended elsewhere. A
   * store that cannot be written: ended in memory all the same, the write retried.
   */
  private async endPack(inst: Instance): Promise<Instance | null> {
    if (this.deps.store.subscribe === undefined) return this.haltLocked(inst, 'stopped', 'pack_ended');
    const now = this.now();
    const updated: Instance = { ...inst, state: 'stopped', updatedAt: now };
    const { mutations, events } = this.revocationsOf(inst.id, 'pack_ended', now);
    const ev = this.event({ type: 'instance.state', instance: inst.id, state: 'stopped', reason: 'pack_ended' });
    events.push(ev);
    try {
      await this.write([
        ...mutations,
        { op: 'putInstance', instance: updated, prev: inst, packEnd: true },
        { op: 'appendEvent', event: ev },
      ]);
    } catch (err) {
      if (err instanceof ObProxyError && err.code === 'invalid_transition') return null;
      return this.haltLocked(inst, 'stopped', 'pack_ended');
    }
    for (const m of mutations) this.applyState(m);
    this.applyState({ op: 'putInstance', instance: updated });
    this.emit(events);
    return updated;
  }

  /** The earliest pack end still to come, for the daemon's timer. */
  nextPackEnd(): number | null {
    let next: number | null = null;
    for (const inst of this.reg.instances.values()) {
      if (inst.packEndsAt === null || !isLive(inst)) continue;
      const t = Date.parse(inst.packEndsAt);
      if (next === null || t < next) next = t;
    }
    return next;
  }

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

  private async mintKey(
    inst: Instance,
    name: string,
    isDefault: boolean,
    limits: KeyLimits = noLimits(),
  ): Promise<CreatedKey> {
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
    await this.commit(
      [{ op: 'putKey', key }],
      this.event({
        type: 'key.created',
        instance: inst.id,
        keyId: key.id,
        keyName: name,
        ...(limited ? { limits: { ...limits } } : {}),
      }),
    );
    return { key: this.reg.keys.get(key.id) as KeyRecord, secret: minted.secret };
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
      this.reg.revoke(key, this.now(), 'manual');
      this.undisplayed.drop([key]);
      const ev = this.event({
        type: 'key.revoked',
        instance: key.instance,
        keyId,
        keyName: key.name,
        reason: 'manual',
      });
      await this.writeRevocations(
        [
          { op: 'putKey', key: { ...key } },
          { op: 'appendEvent', event: ev },
        ],
        [ev],
      );
      return key;
    });
  }

  /**
   * The whole state as this daemon holds it, for `store backup`: what the store holds, plus any
   * revocation whose write failed, with usage counted so far. Under the mutex, so it is never
   * half of a change.
   */
  snapshot(): Promise<StoreData> {
    return this.mutex.run(async () =>
      structuredClone({
        version: STORE_VERSION,
        instances: [...this.reg.instances.values()],
        keys: [...this.reg.keys.values()],
        events: [...this.reg.events],
      }),
    );
  }

  /** Persists usage gathered in memory by the data plane, as increments; never per request. */
  flushUsage(dirty: Iterable<UsageDelta>): Promise<void> {
    const mutations: Mutation[] = [];
    for (const d of dirty) mutations.push({ op: 'addUsage', ...d });
    if (mutations.length === 0) return Promise.resolve();
    return this.write(mutations);
  }

  /**
   * Writes what earlier writes could not (a revocation made while the database was away), without
   * waiting for the next management change: on a shared store the other daemons learn of it only
   * once it is written. Called on the daemon's usage-flush period.
   */
  retryUnwritten(): Promise<void> {
    if (this.unwritten.length === 0) return Promise.resolve();
    return this.mutex.run(async () => {
      if (this.unwritten.length > 0) await this.write([]);
    });
  }

  /** Writes what earlier writes could not; if that fails too, says exactly what is lost. */
  async close(): Promise<void> {
    await this.mutex.run(async () => {
      if (this.unwritten.length === 0) return;
      try {
        await this.write([]);
      } catch (err) {
        throw new UnwrittenAtShutdownError(
          summariseUnwritten(this.unwritten, (id) => this.deps.store.isRevocationDurable?.(id) === true),
          err,
        );
      }
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

export type { InstanceAction };
