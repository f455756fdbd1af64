/**
 * The registry holds the newest audit events only (the store keeps the trail), however long the
 * daemon runs, while event numbers go on from the newest one ever loaded.
 */
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { HELD_EVENTS, MutableRegistry } from '../../src/services/registry.js';
import { bigStoreData } from '../helpers/big-store.js';

const event = (seq: number): AuditEvent => ({
  seq,
  at: '2026-11-01T00:00:00.000Z',
  type: 'instance.state',
  instance: 'big-0',
  state: 'ready',
});

describe('the audit events a registry holds', () => {
  it('are the newest HELD_EVENTS at load, and never more than twice that as events are added', () => {
    const r = MutableRegistry.from(bigStoreData({ instances: 2, keys: 10, events: 3 * HELD_EVENTS }));
    expect(r.events.map((e) => e.seq)).toEqual(Array.from({ length: HELD_EVENTS }, (_, i) => 2 * HELD_EVENTS + i + 1));
    let most = 0;
    for (let i = 0; i < 5 * HELD_EVENTS; i++) {
      r.addEvent(event(r.nextSeq()));
      most = Math.max(most, r.events.length);
    }
    expect(most).toBe(2 * HELD_EVENTS - 1);
    const held = r.events.map((e) => e.seq);
    expect(held[held.length - 1]).toBe(8 * HELD_EVENTS);
    // In order and without a gap: the newest ones.
    expect(held).toEqual(Array.from({ length: held.length }, (_, i) => 8 * HELD_EVENTS - held.length + i + 1));
  });
});
