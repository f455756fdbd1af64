import { hasSecretShape, hashSecret } from '../domain/api-key.js';
import { keyIdInSecret } from '../domain/secret-shape.js';
import type { Instance } from '../domain/instance.js';
import {
  type AuditEvent,
  type KeyLimits,
  type KeyRecord,
  type KeyUsage,
  type RevokeReason,
  addUsage,
} from '../domain/key.js';
import { addByRoute, routeCounters } from '../domain/route-usage.js';
import { KeyOrder } from './key-order.js';
import type { StoreData, UsageDelta } from '../store/store.js';

/**
 * Audit events the registry holds: enough to tell a reload's new events from those heard, not the
 * trail, which grows with history for as long as a daemon runs (the store keeps it; the audit
 * route reads it there).
 */
export const HELD_EVENTS = 1000;

export type AuthResult =
  | { ok: true; key: KeyRecord; instance: Instance }
  | {
      ok: false;
      code: 'invalid_api_key' | 'revoked_api_key' | 'deployment_not_found' | 'deployment_not_ready';
      key?: KeyRecord;
      instance?: Instance;
      packEnded?: boolean;
      /** The key's rotation grace has ended: refused already, its revocation to be written. */
      graceEnded?: boolean;
      /**
       * invalid_api_key for a secret whose id part is well formed: that id, and whether a key has
       * it (its tail is wrong: a secret cut or mistyped) or none does. For the operator's log only:
       * the client's answer is the same either way, so ids cannot be probed through it.
       */
      keyId?: string;
      keyKnown?: boolean;
    };

/**
 * What everyone but the lifecycle sees of the registry: the maps as read-only views, the
 * request path's checks, and the key lists. LifecycleService holds the MutableRegistry behind
 * it and is the only one that changes it; UsageTracker counts through KeyCounters.
 */
export interface Registry {
  readonly instances: ReadonlyMap<string, Instance>;
  readonly keys: ReadonlyMap<string, KeyRecord>;
  readonly events: readonly AuditEvent[];
  authenticate(secret: string, nowMs: number, requireReady: boolean): AuthResult;
  check(key: KeyRecord, nowMs: number, requireReady: boolean): AuthResult;
  activeKeyCount(instanceId: string): number;
  keysOf(instanceId: string): KeyRecord[];
  keysOfDeployment(instance: Instance): KeyRecord[];
  hasLimitedKey(): boolean;
  /** Keys by creation (createdAt, id), a page after the key `after` (null: the first page). */
  keyPage(q: KeyPageQuery): KeyPage;
  /** Revoked keys by revocation (revokedAt, id), a page after the key `after`. */
  revocationPage(q: KeyPageQuery): KeyPage;
}

export interface KeyPageQuery {
  instance?: string | undefined;
  status?: 'active' | 'revoked' | undefined;
  /** Only the records it accepts (with `status`): a page may then come back short, with `next`. */
  keep?: ((k: KeyRecord) => boolean) | undefined;
  after: KeyRecord | null;
  limit: number;
}

/** A page of a key list: `next`, the cursor of the page after it (null: this was the last). */
export interface KeyPage {
  records: KeyRecord[];
  next: string | null;
}

/** How a request sent to the model server ended, for the key's counters. */
export type RequestOutcome = 'ok' | 'error' | 'disconnect';

/** What one finished exchange adds to its key. */
export interface ExchangeCounts {
  /** The client API it came through (`chat`, `responses`, ...): KeyUsage.byRoute. */
  route: string;
  prompt: number;
  completion: number;
  /** Part of `completion`, when the model server reports it. */
  reasoning: number;
  /** Part of `prompt` and `completion`: charged by estimate, not reported by the model server. */
  estimated: number;
  outcome: RequestOutcome;
}

/** The request path's only writes to the registry: a key's running usage, in place. */
export interface KeyCounters {
  countRequest(key: KeyRecord, at: string, route: string, promptTokens: number, completionTokens: number): void;
  countExchange(key: KeyRecord, c: ExchangeCounts): void;
}

/**
 * The daemon's in-memory view of the store: the data plane authenticates and routes from these
 * maps alone, with no I/O. Records are changed in place, so a request in flight that holds a
 * key sees its revocation or new limits at its next check.
 */
export class MutableRegistry implements Registry, KeyCounters {
  private readonly instanceMap = new Map<string, Instance>();
  private readonly keyMap = new Map<string, KeyRecord>();
  private readonly byHash = new Map<string, KeyRecord>();
  /**
   * Keys by instance id, in the order they were added: a stop or a listing of one instance's keys
   * looks at its own keys, not at every key of the store (10,000 on a large one).
   */
  private readonly byInstance = new Map<string, KeyRecord[]>();
  /**
   * Active keys with a limit: the shared store's limit exchange asks at every tick whether there
   * is one, which a scan of every key (10,000 on a large store, revoked ones included) answered.
   */
  private readonly limited = new Set<string>();
  private readonly graced = new Map<string, KeyRecord>();
  private eventList: AuditEvent[] = [];
  private seq = 0;
  /** The key lists' orders (revoked keys only in the second): built at load, kept by putKey and revoke. */
  private readonly byCreation = new KeyOrder((k) => k.createdAt);
  private readonly byRevocation = new KeyOrder((k) => k.revokedAt ?? k.createdAt, true);
  private ordering = true;

  static from(data: StoreData): MutableRegistry {
    const r = new MutableRegistry();
    for (const i of data.instances) r.instanceMap.set(i.id, i);
    r.ordering = false;
    // A fresh registry's keys go in without a look for an earlier record (at 1,000,000 keys each
    // map operation is a cache miss or more, about a microsecond); a repeat, which the store's
    // check or its database's unique columns rule out, is still seen by the maps' sizes.
    for (const k of data.keys) r.addLoadedKey(k);
    r.byCreation.rebuild(r.keyMap.values());
    r.byRevocation.rebuild([...r.keyMap.values()].filter((k) => k.status === 'revoked'));
    r.ordering = true;
    r.seq = data.events.reduce((m, e) => Math.max(m, e.seq), 0);
    r.eventList = data.events.slice(-HELD_EVENTS);
    return r;
  }

  get instances(): ReadonlyMap<string, Instance> {
    return this.instanceMap;
  }

  get keys(): ReadonlyMap<string, KeyRecord> {
    return this.keyMap;
  }

  /** The newest audit events (at most 2 × HELD_EVENTS); the whole trail is the store's. */
  get events(): readonly AuditEvent[] {
    return this.eventList;
  }

  /** The next audit sequence number, taken. */
  nextSeq(): number {
    return ++this.seq;
  }

  /**
   * Adds an event in sequence order: a shared store numbers events at commit, and this daemon may
   * hear another's earlier commit after adding its own later one.
   */
  addEvent(e: AuditEvent): void {
    const list = this.eventList;
    let at = list.length;
    while (at > 0 && list[at - 1]!.seq > e.seq) at--;
    if (at === list.length) list.push(e);
    else list.splice(at, 0, e);
    if (e.seq > this.seq) this.seq = e.seq;
    // Trimmed in steps, so the cost of a trim is spread over HELD_EVENTS additions.
    if (list.length >= 2 * HELD_EVENTS) list.splice(0, list.length - HELD_EVENTS);
  }

  putInstance(instance: Instance): void {
    this.instanceMap.set(instance.id, instance);
  }

  deleteInstance(id: string): void {
    this.instanceMap.delete(id);
  }

  private addLoadedKey(key: KeyRecord): void {
    const ids = this.keyMap.size;
    const hashes = this.byHash.size;
    this.keyMap.set(key.id, key);
    this.byHash.set(key.hash, key);
    // One record would shadow the other: its revocation could miss the key a client still holds.
    if (this.keyMap.size === ids || this.byHash.size === hashes)
      throw new Error(
        `The store holds two keys with the same ${this.keyMap.size === ids ? `id ${key.id}` : 'hash'} (instance ${key.instance}). Nothing was changed; remove the repeated record from the store, then start again.`,
      );
    const list = this.byInstance.get(key.instance);
    if (list === undefined) this.byInstance.set(key.instance, [key]);
    else list.push(key);
    if (key.status === 'active' && (hasLimit(key.limits) || key.revokeAt != null)) this.track(key);
  }

  putKey(key: KeyRecord): void {
    const known = this.keyMap.get(key.id);
    if (this.ordering) {
      this.byCreation.put(key, known);
      if (known?.status === 'revoked') {
        if (key.status === 'revoked') this.byRevocation.put(key, known);
        else this.byRevocation.remove(known);
      } else if (key.status === 'revoked') this.byRevocation.put(key);
    }
    this.keyMap.set(key.id, key);
    this.byHash.set(key.hash, key);
    const list = this.byInstance.get(key.instance) ?? [];
    const at = known === undefined ? -1 : list.indexOf(known);
    if (at >= 0) list[at] = key;
    else list.push(key);
    this.byInstance.set(key.instance, list);
    this.track(key);
  }

  /** Active keys with a planned revocation (a rotation's grace): the pack timer looks at these only. */
  rotatingKeys(): Iterable<KeyRecord> {
    return this.graced.values();
  }

  private track(key: KeyRecord): void {
    if (key.status === 'active' && key.revokeAt != null) this.graced.set(key.id, key);
    else this.graced.delete(key.id);
    if (key.status === 'active' && hasLimit(key.limits)) this.limited.add(key.id);
    else this.limited.delete(key.id);
  }

  /** Revoked wins: a key is never made active again, so this is the only status change. */
  revoke(key: KeyRecord, at: string | null, reason: RevokeReason | null): void {
    // Out of the revocation order before its place there changes.
    if (key.status === 'revoked') this.byRevocation.remove(key);
    key.status = 'revoked';
    key.revokedAt = at;
    key.revokeReason = reason;
    this.limited.delete(key.id);
    this.graced.delete(key.id);
    if (this.keyMap.get(key.id) === key) this.byRevocation.put(key);
  }

  keyPage(q: KeyPageQuery): KeyPage {
    const { status, keep } = q;
    const accepts = (k: KeyRecord): boolean =>
      (status === undefined || k.status === status) && (keep === undefined || keep(k));
    if (q.instance !== undefined) {
      // One instance's keys: its own list, ordered here (a page of every key would scan them all).
      const own = new KeyOrder((k) => k.createdAt);
      own.rebuild(this.byInstance.get(q.instance) ?? []);
      return own.page(q.after, q.limit, accepts, Infinity);
    }
    return this.byCreation.page(q.after, q.limit, accepts);
  }

  revocationPage(q: KeyPageQuery): KeyPage {
    const inst = q.instance;
    return this.byRevocation.page(q.after, q.limit, (k) => inst === undefined || k.instance === inst);
  }

  /** An active key to be revoked at `at`: the request path refuses it from then on (check). */
  scheduleRevocation(key: KeyRecord, at: string): void {
    key.revokeAt = at;
    this.track(key);
  }

  setLimits(key: KeyRecord, limits: KeyLimits): void {
    key.limits = { ...limits };
    this.track(key);
  }

  /** Usage written by another daemon of a shared store, added to this daemon's running totals. */
  addStoredUsage(key: KeyRecord, d: UsageDelta): void {
    key.usage = addUsage(key.usage, d);
    if (d.lastUsedAt !== null && (key.lastUsedAt === null || d.lastUsedAt > key.lastUsedAt))
      key.lastUsedAt = d.lastUsedAt;
  }

  /** The store's counters and limits for a key, after a reload of the whole state. */
  resetFromStore(key: KeyRecord, stored: Pick<KeyRecord, 'usage' | 'lastUsedAt' | 'limits'>): void {
    // Its own split too: the request path changes this one in place.
    key.usage = { ...stored.usage, byRoute: addByRoute({}, stored.usage.byRoute) };
    key.lastUsedAt = stored.lastUsedAt;
    key.limits = { ...stored.limits };
    this.track(key);
  }

  countRequest(key: KeyRecord, at: string, route: string, promptTokens: number, completionTokens: number): void {
    key.lastUsedAt = at;
    const u: KeyUsage = key.usage;
    u.requests += 1;
    u.promptTokens += promptTokens;
    u.completionTokens += completionTokens;
    u.firstUsedAt ??= at;
    const r = routeCounters(u.byRoute, route);
    r.requests += 1;
    r.promptTokens += promptTokens;
    r.completionTokens += completionTokens;
  }

  countExchange(key: KeyRecord, c: ExchangeCounts): void {
    const u = key.usage;
    u.promptTokens += c.prompt;
    u.completionTokens += c.completion;
    const r = routeCounters(u.byRoute, c.route);
    r.promptTokens += c.prompt;
    r.completionTokens += c.completion;
    u.reasoningTokens += c.reasoning;
    u.estimatedTokens += c.estimated;
    if (c.outcome === 'error') u.errors += 1;
    else if (c.outcome === 'disconnect') u.disconnects += 1;
  }

  /**
   * docs/contract.md §3 checks 2 to 5, in order. `nowMs` lets the request path see a pack that ended
   * between timer ticks: such a key is already revoked for the client.
   */
  authenticate(secret: string, nowMs: number, requireReady: boolean): AuthResult {
    if (!hasSecretShape(secret)) return { ok: false, code: 'invalid_api_key' };
    const key = this.byHash.get(hashSecret(secret));
    if (key === undefined) return this.noSuchSecret(secret);
    return this.check(key, nowMs, requireReady);
  }

  /** A refusal off the valid-key path: the id part is read only once the hash has missed. */
  private noSuchSecret(secret: string): AuthResult {
    const keyId = keyIdInSecret(secret);
    if (keyId === null) return { ok: false, code: 'invalid_api_key' };
    return { ok: false, code: 'invalid_api_key', keyId, keyKnown: this.keyMap.has(keyId) };
  }

  /**
   * Checks 3 to 5 for a known key, again just before a request goes upstream: the key and its
   * deployment may have changed while the body was arriving.
   */
  check(key: KeyRecord, nowMs: number, requireReady: boolean): AuthResult {
    const instance = this.instanceMap.get(key.instance);
    // The id may have been removed and added again: that is another deployment, not this key's.
    if (instance === undefined || instance.deployment !== key.deployment)
      return { ok: false, code: 'deployment_not_found', key };
    if (key.status !== 'active') return { ok: false, code: 'revoked_api_key', key, instance };
    // A rotated key past its grace: refused between timer ticks, and after a restart before the
    // revocation is written. Absent on every other key, so one comparison for them.
    if (key.revokeAt != null && this.revokeAtMs(key, key.revokeAt) <= nowMs)
      return { ok: false, code: 'revoked_api_key', key, instance, graceEnded: true };
    if (instance.packEndsAt !== null && this.packEndMs(instance, instance.packEndsAt) <= nowMs && isLive(instance)) {
      return { ok: false, code: 'revoked_api_key', key, instance, packEnded: true };
    }
    if (requireReady && (instance.state !== 'ready' || instance.endpoint === null)) {
      return { ok: false, code: 'deployment_not_ready', key, instance };
    }
    return { ok: true, key, instance };
  }

  /** Pack ends and rotation graces as milliseconds, parsed once per record and date rather than per request. */
  private readonly packEnds = new Map<string, { at: string; ms: number }>();
  private readonly revokeAts = new Map<string, { at: string; ms: number }>();

  private packEndMs(instance: Instance, at: string): number {
    let e = this.packEnds.get(instance.id);
    if (e === undefined || e.at !== at) {
      e = { at, ms: Date.parse(at) };
      this.packEnds.set(instance.id, e);
    }
    return e.ms;
  }

  private revokeAtMs(key: KeyRecord, at: string): number {
    let e = this.revokeAts.get(key.id);
    if (e === undefined || e.at !== at) {
      e = { at, ms: Date.parse(at) };
      this.revokeAts.set(key.id, e);
    }
    return e.ms;
  }

  activeKeyCount(instanceId: string): number {
    let n = 0;
    const inst = this.instanceMap.get(instanceId);
    if (inst === undefined) return 0;
    for (const k of this.byInstance.get(instanceId) ?? [])
      if (k.deployment === inst.deployment && k.status === 'active') n++;
    return n;
  }

  /** Every key ever made under this instance id, of any deployment. */
  keysOf(instanceId: string): KeyRecord[] {
    return [...(this.byInstance.get(instanceId) ?? [])];
  }

  /** The keys of the instance's current deployment. */
  keysOfDeployment(instance: Instance): KeyRecord[] {
    return (this.byInstance.get(instance.id) ?? []).filter((k) => k.deployment === instance.deployment);
  }

  /** Whether any active key has a limit (the shared store's limit exchange runs only then). */
  hasLimitedKey(): boolean {
    return this.limited.size > 0;
  }
}

function hasLimit(l: KeyLimits): boolean {
  return l.rpm !== null || l.tpm !== null || l.concurrency !== null;
}

export function isLive(instance: Instance): boolean {
  return instance.state === 'ready' || instance.state === 'pending';
}
