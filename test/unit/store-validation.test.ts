/**
 * Load-time checks of the store (src/store/store-validation.ts) and "revoked wins"
 * (src/store/revoked-wins.ts): every field of every record is checked and a failure names the
 * record and the field; a key's status never disagrees with any record of its revocation.
 */
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/domain/key.js';
import type { JournalRecord } from '../../src/store/revocation-journal.js';
import { revokedWins } from '../../src/store/revoked-wins.js';
import type { StoreData } from '../../src/store/store.js';
import { StoreRecordError, validateStoreData } from '../../src/store/store-validation.js';

const AT = '2026-11-23T12:00:00.000Z';
const instance = {
  id: 'gpu-1',
  deployment: 'd-1',
  model: 'gemma4:26b',
  endpoint: 'http://10.0.0.5:11434',
  state: 'ready',
  packEndsAt: null,
  upstreamTokenFile: null,
  createdAt: AT,
  updatedAt: AT,
};
const key = {
  id: 'AAAAAAAAAAAA',
  name: 'default',
  instance: 'gpu-1',
  deployment: 'd-1',
  hash: 'a'.repeat(64),
  hint: 'ob_sk_…AAAA',
  isDefault: true,
  status: 'active',
  createdAt: AT,
  lastUsedAt: null,
  revokedAt: null,
  revokeReason: null,
  usage: { requests: 0, promptTokens: 0, completionTokens: 0 },
};
const event = { seq: 1, at: AT, type: 'key.created', instance: 'gpu-1', keyId: 'AAAAAAAAAAAA', keyName: 'default' };
const store = (patch: Record<string, unknown> = {}): Record<string, unknown> => ({
  version: 2,
  instances: [instance],
  keys: [key],
  events: [event],
  ...patch,
});

function refusal(raw: unknown): StoreRecordError {
  try {
    validateStoreData('/h/db.json', raw);
  } catch (err) {
    expect(err).toBeInstanceOf(StoreRecordError);
    return err as StoreRecordError;
  }
  throw new Error('accepted');
}

describe('store validation', () => {
  it('accepts a good store, and a version-1 store whose records lack `deployment`', () => {
    expect(validateStoreData('/h/db.json', store())).toMatchObject({ version: 2, keys: [{ id: 'AAAAAAAAAAAA' }] });
    const { deployment: _i, ...v1Instance } = instance;
    const { deployment: _k, ...v1Key } = key;
    expect(validateStoreData('/h/db.json', { version: 1, instances: [v1Instance], keys: [v1Key] }).events).toEqual([]);
  });

  const instanceCases: [string, unknown][] = [
    ['id', ''],
    ['id', '../etc'],
    ['id', 7],
    ['deployment', ''],
    ['model', null],
    ['endpoint', 'ftp://x'],
    ['endpoint', 5],
    ['state', 'running'],
    ['packEndsAt', 'garbage'],
    ['packEndsAt', '2026-11-23'],
    ['packEndsAt', 1798000000000],
    ['upstreamTokenFile', 3],
    ['aliases', 'claude-sonnet-4-5'],
    ['aliases', null],
    ['createdAt', undefined],
    ['updatedAt', 'yesterday'],
  ];
  it.each(instanceCases)('an instance whose %s is %j is refused, naming the instance and the field', (field, value) => {
    const err = refusal(store({ instances: [{ ...instance, [field]: value }] }));
    expect(err.record).toMatch(/^instances\[0\]/);
    expect(err.field).toBe(field);
    expect(err.message).toContain(`field "${field}"`);
    expect(err.message).toContain(
      'The file was left untouched. Fix that record by hand (or restore the file from a backup) and start again.',
    );
  });

  const keyCases: [string, unknown][] = [
    ['id', 'has space'],
    ['name', null],
    ['instance', ''],
    ['hash', 'ob_sk_plaintext'],
    ['hash', 'A'.repeat(64)],
    ['hint', 1],
    ['isDefault', 'yes'],
    ['status', 'enabled'],
    ['createdAt', null],
    ['lastUsedAt', 'now'],
    ['revokedAt', 0],
    ['revokeReason', 'bored'],
    ['usage', null],
  ];
  it.each(keyCases)('a key whose %s is %j is refused, naming the key and the field', (field, value) => {
    const err = refusal(store({ keys: [{ ...key, [field]: value }] }));
    expect(err.record).toMatch(/^keys\[0\]/);
    expect(err.field).toBe(field);
  });

  it('names the exact usage counter, the missing revocation time, duplicates and bad events', () => {
    expect(refusal(store({ keys: [{ ...key, usage: { ...key.usage, promptTokens: -1 } }] })).field).toBe(
      'usage.promptTokens',
    );
    expect(refusal(store({ keys: [{ ...key, status: 'revoked', revokeReason: 'manual' }] })).field).toBe('revokedAt');
    expect(refusal(store({ instances: [instance, instance] })).message).toContain(
      'instances[1] (id "gpu-1"), field "id": instances[0] has the same id',
    );
    expect(refusal(store({ keys: [key, { ...key, id: 'BBBBBBBBBBBB' }] })).message).toContain(
      'field "hash": keys[0] has the same hash',
    );
    expect(refusal(store({ events: [{ ...event, type: 'key.revoked', keyId: undefined }] })).field).toBe('keyId');
    expect(refusal(store({ events: [{ ...event, seq: 0 }] })).field).toBe('seq');
    expect(refusal(store({ instances: [null] })).message).toContain('instances[0]: expected an object, found null');
    expect(refusal(store({ version: '2' })).field).toBe('version');
  });

  it('looks for repeated key ids and hashes only where the store does not rule them out itself', () => {
    const twice = store({ keys: [key, { ...key, hash: 'b'.repeat(64) }] });
    expect(refusal(twice).message).toContain('field "id": keys[0] has the same id');
    // A database with a primary key and a unique hash column never holds them.
    expect(validateStoreData('/h/db.json', twice, { uniqueKeys: true }).keys).toHaveLength(2);
  });

  it('loads usage written before reasoning, estimates, errors, disconnects and first use were counted with those at 0 and null; checks them when present', () => {
    const loaded = validateStoreData(
      '/h/db.json',
      store({ keys: [{ ...key, usage: { requests: 3, promptTokens: 4, completionTokens: 5 } }] }),
    );
    expect(loaded.keys[0]!.usage).toEqual({
      requests: 3,
      promptTokens: 4,
      completionTokens: 5,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: null,
      byRoute: {},
    });
    const full = {
      requests: 3,
      promptTokens: 4,
      completionTokens: 5,
      reasoningTokens: 1,
      estimatedTokens: 2,
      errors: 2,
      disconnects: 1,
      firstUsedAt: AT,
      byRoute: {
        chat: { requests: 2, promptTokens: 3, completionTokens: 1 },
        messages: { requests: 1, promptTokens: 1, completionTokens: 4 },
      },
    };
    expect(validateStoreData('/h/db.json', store({ keys: [{ ...key, usage: full }] })).keys[0]!.usage).toEqual(full);
    expect(refusal(store({ keys: [{ ...key, usage: { ...full, errors: 1.5 } }] })).field).toBe('usage.errors');
    expect(refusal(store({ keys: [{ ...key, usage: { ...full, disconnects: -1 } }] })).field).toBe('usage.disconnects');
    expect(refusal(store({ keys: [{ ...key, usage: { ...full, estimatedTokens: 0.5 } }] })).field).toBe(
      'usage.estimatedTokens',
    );
    expect(refusal(store({ keys: [{ ...key, usage: { ...full, reasoningTokens: '1' } }] })).field).toBe(
      'usage.reasoningTokens',
    );
    expect(refusal(store({ keys: [{ ...key, usage: { ...full, firstUsedAt: 'yesterday' } }] })).field).toBe(
      'usage.firstUsedAt',
    );
    const split = (byRoute: unknown): StoreRecordError =>
      refusal(store({ keys: [{ ...key, usage: { ...full, byRoute } }] }));
    expect(split([]).field).toBe('usage.byRoute');
    expect(split({ chat: 3 }).field).toBe('usage.byRoute.chat');
    expect(split({ chat: { requests: 1, promptTokens: 2 } }).field).toBe('usage.byRoute.chat.completionTokens');
    expect(split({ chat: { requests: -1, promptTokens: 2, completionTokens: 0 } }).field).toBe(
      'usage.byRoute.chat.requests',
    );
    const odd = split(JSON.parse('{"__proto__": {"requests": 1, "promptTokens": 0, "completionTokens": 0}}'));
    expect([odd.field, odd.message]).toEqual([
      'usage.byRoute',
      expect.stringContaining('"__proto__" is not a route name'),
    ]);
    // A route this version does not name (counted by a newer one) is kept, after the known ones.
    const newer = { speech: { requests: 1, promptTokens: 0, completionTokens: 0 }, ...full.byRoute };
    const kept = validateStoreData('/h/db.json', store({ keys: [{ ...key, usage: { ...full, byRoute: newer } }] }));
    expect(Object.keys(kept.keys[0]!.usage.byRoute)).toEqual(['chat', 'messages', 'speech']);
  });

  it('refuses a newer version and something that is not a store, without a record error', () => {
    expect(() => validateStoreData('/h/db.json', store({ version: 3 }))).toThrow(
      /written by a newer ob-proxy \(version 3\)/,
    );
    expect(() => validateStoreData('/h/db.json', [])).toThrow(/is not an ob-proxy store/);
  });
});

describe('revoked wins', () => {
  const data = (k: Partial<KeyRecord> = {}, events: unknown[] = [event]): StoreData =>
    validateStoreData('x', store({ keys: [{ ...key, ...k }], events }));
  const journaled: JournalRecord = {
    keyId: key.id,
    keyHash: key.hash,
    instance: 'gpu-1',
    deployment: 'd-1',
    reason: 'instance_stopped',
    at: '2026-11-24T00:00:00.000Z',
  };

  it("a key the journal holds is revoked with the journal's time and reason, and the audit trail gains the event", () => {
    const r = revokedWins(data(), [journaled]);
    expect(r.data.keys[0]).toMatchObject({
      status: 'revoked',
      revokedAt: journaled.at,
      revokeReason: 'instance_stopped',
    });
    expect(r.data.events.at(-1)).toMatchObject({
      seq: 2,
      type: 'key.revoked',
      keyId: key.id,
      reason: 'instance_stopped',
      at: journaled.at,
    });
    expect(r.notices[0]).toMatch(
      /^Key AAAAAAAAAAAA \(instance gpu-1\) was active in the store, but the revocation journal records its revocation/,
    );
    expect(r.unjournaled).toEqual([]);
    expect(r.changed).toEqual([r.data.keys[0]]);
  });

  it('matches the journal by hash too: renaming the key id does not bring it back', () => {
    expect(revokedWins(data({ id: 'ZZZZZZZZZZZZ' }), [journaled]).data.keys[0]!.status).toBe('revoked');
  });

  it('a key.revoked event in the audit trail wins over an active status, without a second event', () => {
    const revokedEvent = { seq: 2, at: AT, type: 'key.revoked', instance: 'gpu-1', keyId: key.id, reason: 'manual' };
    const r = revokedWins(data({}, [event, revokedEvent]), []);
    expect(r.data.keys[0]).toMatchObject({ status: 'revoked', revokeReason: 'manual', revokedAt: AT });
    expect(r.data.events).toHaveLength(2);
    expect(r.unjournaled).toMatchObject([{ keyId: key.id, reason: 'manual' }]);
  });

  it('an active key that still carries its revokedAt/revokeReason is revoked', () => {
    expect(revokedWins(data({ revokedAt: AT, revokeReason: 'pack_ended' }), []).data.keys[0]).toMatchObject({
      status: 'revoked',
      revokeReason: 'pack_ended',
    });
  });

  it('gives a revoked key whose key.revoked event was deleted its event back, so `revocations` lists it', () => {
    const r = revokedWins(data({ status: 'revoked', revokedAt: AT, revokeReason: 'manual' }), []);
    expect(r.data.events.at(-1)).toMatchObject({
      seq: 2,
      type: 'key.revoked',
      keyId: key.id,
      reason: 'manual',
      at: AT,
    });
    expect(r.notices[0]).toMatch(/key\.revoked event was missing from the audit trail: added again/);
  });

  it('leaves active keys with no record of revocation alone, and lists revoked keys the journal lacks', () => {
    expect(revokedWins(data(), []).data.keys[0]!.status).toBe('active');
    const r = revokedWins(data({ status: 'revoked', revokedAt: AT, revokeReason: 'manual' }), []);
    expect(r.unjournaled).toEqual([
      { keyId: key.id, keyHash: key.hash, instance: 'gpu-1', deployment: 'd-1', reason: 'manual', at: AT },
    ]);
    expect(JSON.stringify(r.unjournaled)).not.toMatch(/ob_sk_/);
  });
});
