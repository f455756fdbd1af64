import { randomUUID } from 'node:crypto';
import { iso } from '../clock.js';
import { type InstanceAction } from '../domain/instance.js';
import { upgradeStoreData } from '../store/upgrade.js';
import { MutableRegistry } from './registry.js';
import { type LifecycleDeps } from './lifecycle/commit-protocol.js';
import { ModelCommands } from './lifecycle/model-commands.js';

export { DEFAULT_KEY_NAME } from './lifecycle/commit-protocol.js';
export type { ChangeListener, CreatedKey, LifecycleDeps, ReadyResult } from './lifecycle/commit-protocol.js';
export { keyNotFound } from './lifecycle/key-commands.js';

/**
 * Every change to instances and keys goes through here, one at a time (a mutex), and is durable
 * before it is acknowledged: the commit protocol (lifecycle/commit-protocol.ts), changes heard
 * from a shared store (replication.ts), key commands (key-commands.ts), instance commands
 * (instance-commands.ts), pack ends (pack-ends.ts) and the allowed models (model-commands.ts),
 * each a layer of this one service.
 */
export class LifecycleService extends ModelCommands {
  static async open(deps: LifecycleDeps): Promise<LifecycleService> {
    const upgraded = upgradeStoreData(await deps.store.load(), {
      newId: deps.deploymentId ?? randomUUID,
      now: iso(deps.clock.now()),
    });
    // Written before the daemon serves: an old store's keys of removed deployments stay revoked.
    if (upgraded.mutations.length > 0) await deps.store.commit(upgraded.mutations);
    const lc = new LifecycleService(deps, MutableRegistry.from(upgraded.data));
    if (upgraded.data.models != null) lc.storedModels = [...upgraded.data.models];
    // A shared store: what other daemons change reaches this registry, and this daemon's listeners.
    deps.store.subscribe?.({ changes: (c) => lc.applyRemote(c), reload: (d) => lc.applySnapshot(d) });
    return lc;
  }

  /** The model ids an instance may be added with now (the store's list, once one was set). */
  get models(): readonly string[] {
    return this.allowedModels;
  }
}

export type { InstanceAction };
