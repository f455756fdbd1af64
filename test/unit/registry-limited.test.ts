import { describe, expect, it } from 'vitest';
import { type KeyLimits, type KeyRecord, emptyUsage, noLimits } from '../../src/domain/key.js';
import { keyRecord } from '../helpers/key-record.js';
import { MutableRegistry } from '../../src/services/registry.js';
import { STORE_VERSION } from '../../src/store/store.js';

function key(id: string, limits: KeyLimits = noLimits(), status: KeyRecord['status'] = 'active'): KeyRecord {
  return keyRecord(id, { limits, status });
}

const rpm = (n: number): KeyLimits => ({ ...noLimits(), rpm: n });

// The shared store's limit exchange runs only while this says true: it must follow every
// way a key gains or loses a limit, or stops being active, without scanning the keys.
describe('MutableRegistry.hasLimitedKey', () => {
  it('follows limits set, cleared, revocations, replacements and reloads', () => {
    const r = MutableRegistry.from({
      version: STORE_VERSION,
      instances: [],
      keys: [key('a'), key('b', rpm(5), 'revoked')],
      events: [],
    });
    expect(r.hasLimitedKey()).toBe(false);

    const a = r.keys.get('a')!;
    r.setLimits(a, { ...noLimits(), concurrency: 2 });
    expect(r.hasLimitedKey()).toBe(true);
    r.setLimits(a, noLimits());
    expect(r.hasLimitedKey()).toBe(false);

    r.putKey(key('c', { ...noLimits(), tpm: 100 }));
    expect(r.hasLimitedKey()).toBe(true);
    // Another daemon's copy of the same key, without the limit, replaces it.
    r.putKey(key('c'));
    expect(r.hasLimitedKey()).toBe(false);

    r.resetFromStore(a, { usage: emptyUsage(), lastUsedAt: null, limits: rpm(10) });
    expect(r.hasLimitedKey()).toBe(true);
    r.revoke(a, '2026-11-24T01:00:00.000Z', 'manual');
    expect(r.hasLimitedKey()).toBe(false);
    // A revoked key's limits never count again.
    r.setLimits(a, rpm(20));
    expect(r.hasLimitedKey()).toBe(false);
  });

  it('counts limited active keys loaded with the store', () => {
    const r = MutableRegistry.from({
      version: STORE_VERSION,
      instances: [],
      keys: [key('a'), key('b', rpm(5))],
      events: [],
    });
    expect(r.hasLimitedKey()).toBe(true);
  });
});
