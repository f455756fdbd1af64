import { type Clock, iso } from '../../clock.js';
import { type SecretSource } from '../../domain/api-key.js';
import { clipped } from '../../printable.js';
import { type Instance, withAliases } from '../../domain/instance.js';
import { type AuditEvent, type KeyRecord } from '../../domain/key.js';
import { ObProxyError, obError } from '../../errors.js';
import {
  type AuditQuery,
  type BucketQuery,
  STORE_VERSION,
  type Mutation,
  type Store,
  type StoreData,
  type UsageDelta,
} from '../../store/store.js';
import { type UsageBucket, byStartAndKey } from '../../domain/usage-buckets.js';
import { Mutex } from '../mutex.js';
import { UndisplayedSecrets } from '../default-secrets.js';
import { type KeyCounters, MutableRegistry, type Registry, isLive } from '../registry.js';
import { UnwrittenAtShutdownError, revokedKeyIds, summariseUnwritten } from '../unwritten.js';

export interface LifecycleDeps {
  store: Store;
  clock: Clock;
  secrets: SecretSource;
  /**
   * The model ids allowed while the store holds no list of its own (OB_PROXY_MODELS, or the
   * default ids): the first `models allow` or `disallow` writes the list, which wins from then on.
   */
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
 * The commit protocol every change to instances and keys goes through: one at a time (a mutex),
 * and durable before it is acknowledged. Creations are written first and then become usable;
 * revocations take effect in memory first and are then written, so a failed write can lose a
 * creation the caller never saw, but can never leave a revoked key usable in this process.
 * Writes that failed are kept and written with the next one (or by retryUnwritten and close).
 */
export class LifecycleCore {
  protected readonly reg: MutableRegistry;
  protected readonly mutex = new Mutex();
  protected readonly listeners = new Set<ChangeListener>();
  protected readonly undisplayed = new UndisplayedSecrets();
  /** Mutations applied in memory whose write failed; written with the next commit. */
  protected unwritten: Mutation[] = [];
  /** Why the last write failed (null: it did not). */
  protected unwrittenWhy: string | null = null;
  protected readonly inflightDefaults = new Map<string, Promise<KeyRecord | null>>();
  /** The allowed model list the store holds; null while it holds none (deps.models apply). */
  protected storedModels: readonly string[] | null = null;

  constructor(
    protected readonly deps: LifecycleDeps,
    registry: MutableRegistry,
  ) {
    this.reg = registry;
  }

  /** The model ids an instance may be added with now. */
  get allowedModels(): readonly string[] {
    return this.storedModels ?? this.deps.models;
  }

  /** The registry as everyone else sees it: read only. */
  get registry(): Registry {
    return this.reg;
  }

  /** The request path's usage counting, the one change to the registry made outside this class. */
  get usageCounters(): KeyCounters {
    return this.reg;
  }

  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  protected now(): string {
    return iso(this.deps.clock.now());
  }

  protected event(partial: Omit<AuditEvent, 'seq' | 'at'>): AuditEvent {
    return { seq: this.reg.nextSeq(), at: this.now(), ...partial };
  }

  protected emit(events: AuditEvent[], origin: 'local' | 'remote' = 'local'): void {
    for (const e of events) {
      this.reg.addEvent(e);
      for (const l of this.listeners) l(e, origin);
    }
  }

  /**
   * A mutation as the registry takes it: the same for a change made here (after it is written)
   * and one heard from a shared store. Records are copied in, so nothing a store keeps is shared
   * with the request path.
   */
  protected applyState(m: Mutation): void {
    switch (m.op) {
      case 'putInstance': {
        // A record from a daemon older than aliases, sharing the store, has none.
        const inst = withAliases(structuredClone(m.instance));
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
      case 'scheduleRevocation': {
        // In place: requests in flight check this very record.
        const key = this.reg.keys.get(m.keyId);
        if (key?.status === 'active') this.reg.scheduleRevocation(key, m.at);
        break;
      }
      case 'setModels':
        this.storedModels = [...m.models];
        break;
      case 'appendEvent':
        break;
    }
  }

  /** A key this daemon knows, revoked as a revocation heard says (in place: requests hold the record). */
  protected revokeKnown(key: KeyRecord): void {
    const known = this.reg.keys.get(key.id);
    if (known === undefined || known.status !== 'active') return;
    this.reg.revoke(known, key.revokedAt, key.revokeReason);
    this.undisplayed.drop([known]);
  }

  /** Writes mutations, after any that failed to be written before. */
  protected async write(mutations: Mutation[]): Promise<void> {
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
  protected async commit(mutations: Mutation[], event: AuditEvent): Promise<void> {
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
  protected async fresh<T>(fn: () => Promise<T>): Promise<T> {
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

  /**
   * Writes revocations already in effect in memory, and tells listeners of them whether or not the
   * write succeeds: in-flight work of those keys must end, and the console and audit trail must
   * show them (a failed write is retried with the next one).
   */
  protected async writeRevocations(mutations: Mutation[], events: AuditEvent[]): Promise<void> {
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

  /**
   * The whole state as this daemon holds it, for `store backup`: what the store holds, plus any
   * revocation whose write failed, with usage counted so far. Under the mutex, so it is never
   * half of a change.
   */
  snapshot(): Promise<StoreData> {
    return this.mutex.run(async () => {
      const all = { since: null, until: null, keyIds: null };
      const buckets = (await this.deps.store.usageBuckets?.(all)) ?? [];
      return structuredClone({
        version: STORE_VERSION,
        instances: [...this.reg.instances.values()],
        keys: [...this.reg.keys.values()],
        events: [...((await this.deps.store.auditEvents?.({ limit: Number.MAX_SAFE_INTEGER })) ?? this.reg.events)],
        ...(this.storedModels === null ? {} : { models: [...this.storedModels] }),
        ...(buckets.length === 0 ? {} : { usageBuckets: buckets }),
      });
    });
  }

  /** The newest audit events, from the store (the registry holds only the newest few). */
  async auditEvents(q: AuditQuery): Promise<readonly Readonly<AuditEvent>[]> {
    if (this.deps.store.auditEvents !== undefined) return this.deps.store.auditEvents(q);
    const held = this.reg.events.filter((e) => q.instance === undefined || e.instance === q.instance);
    return held.slice(Math.max(0, held.length - q.limit));
  }

  /** Usage by the hour and day as the store keeps it (none from a store that keeps none). */
  async usageBuckets(q: BucketQuery): Promise<UsageBucket[]> {
    return ((await this.deps.store.usageBuckets?.(q)) ?? []).sort(byStartAndKey);
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
