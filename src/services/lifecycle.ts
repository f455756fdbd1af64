import { randomUUID } from 'node:crypto';
import { iso } from '../clock.js';
import { type InstanceAction } from '../domain/instance.js';
import { upgradeStoreData } from '../store/upgrade.js';
import { MutableRegistry } from './registry.js';
import { type LifecycleDeps } from './lifecycle/commit-protocol.js';
import { PackEnds } from './lifecycle/pack-ends.js';

export { DEFAULT_KEY_NAME } from './lifecycle/commit-protocol.js';
export type { ChangeListener, CreatedKey, LifecycleDeps, ReadyResult } from './lifecycle/commit-protocol.js';
export { keyNotFound } from './lifecycle/key-commands.js';

/**
 * Every change to instances and keys goes through here, one at a time (a mutex), and is durable
 * before it is acknowledged: the commit protocol (lifecycle/commit-protocol.ts), changes heard
 * from a shared store (replication.ts), key commands (key-commands.ts), instance commands
 * (instance-commands.ts) and pack ends (pack-ends.ts), each a layer of this one service.
 */
export class LifecycleService extends PackEnds {
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
}

export type { InstanceAction };
