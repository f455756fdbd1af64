/**
 * src/store/postgres/sync-state.ts alone: in sync as of the older of the last read and the last
 * write, each counted from when it began; a write that waits keeps the daemon at the time it
 * began, and is named as the reason once it has waited a second.
 */
import { describe, expect, it } from 'vitest';
import { SyncState } from '../../src/store/postgres/sync-state.js';

const T0 = Date.parse('2026-11-23T12:00:00.000Z');

describe('SyncState', () => {
  it('a write that waits holds the daemon at the time it began, and is named after a second', () => {
    let now = T0;
    const s = new SyncState(() => now);
    s.loaded(T0);
    now = T0 + 500;
    s.read(T0 + 500);
    s.writing(T0 + 500);
    expect([s.lastInSync(), s.problem()]).toEqual([T0, null]);
    now = T0 + 1499;
    expect(s.problem()).toBeNull();
    now = T0 + 4000;
    s.read(T0 + 4000);
    expect(s.lastInSync()).toBe(T0);
    expect(s.problem()).toBe(
      'cannot write: a write has waited 3.5 s for the database (a lock held on ob_revocations or ob_daemons?)',
    );
    s.writeFailed('55P03: canceling statement due to lock timeout');
    expect(s.problem()).toBe('cannot write: 55P03: canceling statement due to lock timeout');
    s.writing(T0 + 4100);
    expect(s.wrote(T0 + 4100)).toBe(true);
    expect([s.lastInSync(), s.problem()]).toEqual([T0 + 4000, null]);
  });

  it('a read that fails is named before a write that fails', () => {
    const s = new SyncState(() => T0);
    s.writeFailed('25006: read-only');
    s.readFailed('ECONNREFUSED');
    expect(s.problem()).toBe('cannot read the change log: ECONNREFUSED');
  });
});
