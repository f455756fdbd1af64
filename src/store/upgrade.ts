import type { Instance } from '../domain/instance.js';
import type { AuditEvent, KeyRecord } from '../domain/key.js';
import { STORE_VERSION, type Mutation, type StoreData } from './store.js';

export interface Upgraded {
  data: StoreData;
  /** What must be written for the store on disk to match `data`. */
  mutations: Mutation[];
}

/**
 * Version 1 stores had no deployment ids: an instance removed and added again under the same id
 * looked like the same deployment, and its old keys served the new rental. Each instance gets a
 * new deployment id; a key belongs to it only when it was made after the instance was added
 * (earlier keys came from a removed deployment). A key whose deployment is gone and that is still
 * active is revoked (`instance_removed`) and recorded in the audit trail.
 */
export function upgradeStoreData(data: StoreData, opts: { newId: () => string; now: string }): Upgraded {
  const mutations: Mutation[] = [];
  const instances = new Map<string, Instance>();
  for (const raw of data.instances) {
    let inst = raw;
    if (typeof inst.deployment !== 'string' || inst.deployment === '') {
      inst = { ...inst, deployment: opts.newId() };
      mutations.push({ op: 'putInstance', instance: inst });
    }
    instances.set(inst.id, inst);
  }
  let seq = data.events.reduce((m, e) => Math.max(m, e.seq), 0);
  const events: AuditEvent[] = [...data.events];
  const keys: KeyRecord[] = [];
  for (const raw of data.keys) {
    let key = raw;
    if (typeof key.deployment !== 'string' || key.deployment === '') {
      const inst = instances.get(key.instance);
      const current = inst !== undefined && Date.parse(key.createdAt) >= Date.parse(inst.createdAt);
      key = { ...key, deployment: current ? inst.deployment : `removed:${opts.newId()}` };
      if (!current && key.status === 'active') {
        key = { ...key, status: 'revoked', revokedAt: opts.now, revokeReason: 'instance_removed' };
        const ev: AuditEvent = {
          seq: ++seq,
          at: opts.now,
          type: 'key.revoked',
          instance: key.instance,
          keyId: key.id,
          keyName: key.name,
          reason: 'instance_removed',
        };
        events.push(ev);
        mutations.push({ op: 'appendEvent', event: ev });
      }
      mutations.push({ op: 'putKey', key });
    }
    keys.push(key);
  }
  const models = data.models == null ? {} : { models: data.models };
  return { data: { version: STORE_VERSION, instances: [...instances.values()], keys, events, ...models }, mutations };
}
