/**
 * A store whose check was skipped because its database rules repeats out (PostgreSQL's unique
 * columns) still never loads two records of one key: the registry's maps would keep one, and a
 * revocation could reach the other.
 */
import { describe, expect, it } from 'vitest';
import { MutableRegistry } from '../../src/services/registry.js';
import { bigStoreData } from '../helpers/big-store.js';

describe('a registry loaded with a repeated key', () => {
  const data = bigStoreData({ instances: 2, keys: 4, events: 0 });
  const [first, second] = data.keys;

  it('refuses a repeated id, naming it, and a repeated hash', () => {
    expect(() => MutableRegistry.from({ ...data, keys: [...data.keys, { ...first!, hash: 'f'.repeat(64) }] })).toThrow(
      `The store holds two keys with the same id ${first!.id} (instance ${first!.instance}). Nothing was changed; remove the repeated record from the store, then start again.`,
    );
    expect(() => MutableRegistry.from({ ...data, keys: [...data.keys, { ...second!, id: 'ZZZZZZZZZZZZ' }] })).toThrow(
      'The store holds two keys with the same hash',
    );
  });

  it('loads keys that repeat nothing', () => {
    expect(MutableRegistry.from(data).keys.size).toBe(4);
  });
});
