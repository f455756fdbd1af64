import { type AuditEvent } from '../../domain/key.js';
import { type StoreChange, type StoreData } from '../../store/store.js';

import { LifecycleCore } from './commit-protocol.js';

/** What other daemons change in a shared store, taken into this daemon's registry. */
export class LifecycleReplica extends LifecycleCore {
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
      if (data.models != null) this.applyState({ op: 'setModels', models: data.models, prev: null, disallowed: [] });
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
}
