import { type Instance } from '../../domain/instance.js';
import { ObProxyError } from '../../errors.js';
import { isLive } from '../registry.js';

import { KeyRotation } from './key-rotation.js';

/**
 * Packs whose time has come: the instance stopped, its keys revoked with pack_ended. The same
 * timer revokes the keys whose rotation's grace has ended.
 */
export class PackEnds extends KeyRotation {
  /**
   * Ends every pack whose time has come (instance stopped, keys revoked with pack_ended), then
   * revokes the keys whose rotation's grace has ended (reason rotated).
   */
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
      await this.revokeDueRotations();
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
  protected async endPack(inst: Instance): Promise<Instance | null> {
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

  /** The earliest pack end, or end of a rotation's grace, still to come, for the daemon's timer. */
  nextPackEnd(): number | null {
    let next: number | null = this.nextRotationEnd();
    for (const inst of this.reg.instances.values()) {
      if (inst.packEndsAt === null || !isLive(inst)) continue;
      const t = Date.parse(inst.packEndsAt);
      if (next === null || t < next) next = t;
    }
    return next;
  }
}
