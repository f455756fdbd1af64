import { hasSecretShape, hashSecret } from '../domain/api-key.js';
import type { Instance } from '../domain/instance.js';
import type { AuditEvent, KeyRecord } from '../domain/key.js';
import type { StoreData } from '../store/store.js';

export type AuthResult =
  | { ok: true; key: KeyRecord; instance: Instance }
  | { ok: false; code: 'invalid_api_key' | 'revoked_api_key' | 'deployment_not_found' | 'deployment_not_ready'; key?: KeyRecord; instance?: Instance; packEnded?: boolean };

/**
 * The daemon's in-memory view of the store: the data plane authenticates and routes from these
 * maps alone, with no I/O. Only LifecycleService mutates it.
 */
export class Registry {
  readonly instances = new Map<string, Instance>();
  readonly keys = new Map<string, KeyRecord>();
  readonly byHash = new Map<string, KeyRecord>();
  events: AuditEvent[] = [];
  lastSeq = 0;

  static from(data: StoreData): Registry {
    const r = new Registry();
    for (const i of data.instances) r.instances.set(i.id, i);
    for (const k of data.keys) r.putKey(k);
    r.events = data.events;
    r.lastSeq = data.events.reduce((m, e) => Math.max(m, e.seq), 0);
    return r;
  }

  /**
   * Keys by instance id, in the order they were added: a stop or a listing of one instance's keys
   * looks at its own keys, not at every key of the store (10,000 on a large one).
   */
  private readonly byInstance = new Map<string, KeyRecord[]>();

  putKey(key: KeyRecord): void {
    const known = this.keys.get(key.id);
    this.keys.set(key.id, key);
    this.byHash.set(key.hash, key);
    const list = this.byInstance.get(key.instance) ?? [];
    const at = known === undefined ? -1 : list.indexOf(known);
    if (at >= 0) list[at] = key;
    else list.push(key);
    this.byInstance.set(key.instance, list);
  }

  /**
   * CONTRACT §3 checks 2 to 5, in order. `nowMs` lets the request path see a pack that ended
   * between timer ticks: such a key is already revoked for the client.
   */
  authenticate(secret: string, nowMs: number, requireReady: boolean): AuthResult {
    if (!hasSecretShape(secret)) return { ok: false, code: 'invalid_api_key' };
    const key = this.byHash.get(hashSecret(secret));
    if (key === undefined) return { ok: false, code: 'invalid_api_key' };
    return this.check(key, nowMs, requireReady);
  }

  /**
   * Checks 3 to 5 for a known key, again just before a request goes upstream: the key and its
   * deployment may have changed while the body was arriving.
   */
  check(key: KeyRecord, nowMs: number, requireReady: boolean): AuthResult {
    const instance = this.instances.get(key.instance);
    // The id may have been removed and added again: that is another deployment, not this key's.
    if (instance === undefined || instance.deployment !== key.deployment) return { ok: false, code: 'deployment_not_found', key };
    if (key.status !== 'active') return { ok: false, code: 'revoked_api_key', key, instance };
    if (instance.packEndsAt !== null && this.packEndMs(instance, instance.packEndsAt) <= nowMs && isLive(instance)) {
      return { ok: false, code: 'revoked_api_key', key, instance, packEnded: true };
    }
    if (requireReady && (instance.state !== 'ready' || instance.endpoint === null)) {
      return { ok: false, code: 'deployment_not_ready', key, instance };
    }
    return { ok: true, key, instance };
  }

  /** Pack ends as milliseconds, parsed once per instance and date rather than per request. */
  private readonly packEnds = new Map<string, { at: string; ms: number }>();

  private packEndMs(instance: Instance, at: string): number {
    let e = this.packEnds.get(instance.id);
    if (e === undefined || e.at !== at) {
      e = { at, ms: Date.parse(at) };
      this.packEnds.set(instance.id, e);
    }
    return e.ms;
  }

  activeKeyCount(instanceId: string): number {
    let n = 0;
    const inst = this.instances.get(instanceId);
    if (inst === undefined) return 0;
    for (const k of this.byInstance.get(instanceId) ?? []) if (k.deployment === inst.deployment && k.status === 'active') n++;
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
}

export function isLive(instance: Instance): boolean {
  return instance.state === 'ready' || instance.state === 'pending';
}
