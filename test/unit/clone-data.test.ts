/**
 * A store's data handed to a registry: every object its own (the registry counts usage and sets
 * limits in place), equal to what the store holds.
 */
import { describe, expect, it } from 'vitest';
import { cloneData } from '../../src/store/clone-data.js';
import { validateStoreData } from '../../src/store/store-validation.js';
import { bigStoreData } from '../helpers/big-store.js';

describe('cloneData', () => {
  it('is equal to the data and shares no object with it', () => {
    const data = validateStoreData('big', bigStoreData({ instances: 2, keys: 10, events: 30 }));
    data.keys[0]!.usage.byRoute = { chat: { requests: 1, promptTokens: 2, completionTokens: 3 } };
    const copy = cloneData(data);
    expect(copy).toEqual(data);
    copy.keys[0]!.usage.requests += 5;
    copy.keys[0]!.usage.byRoute.chat!.requests += 5;
    copy.keys[0]!.limits.rpm = 7;
    copy.instances[0]!.state = 'stopped';
    copy.events[0]!.seq = 99;
    expect(data.keys[0]!.usage.requests).toBe(0);
    expect(data.keys[0]!.usage.byRoute.chat!.requests).toBe(1);
    expect(data.keys[0]!.limits.rpm).toBeNull();
    expect(data.instances[0]!.state).toBe('ready');
    expect(data.events[0]!.seq).toBe(1);
  });
});
