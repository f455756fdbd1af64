/**
 * A large store, as a daemon that has run for a long time leaves it: `instances` ready instances,
 * `keys` keys spread over them (a fifth of them revoked), and `events` audit events (one
 * `key.created` per key, one `key.revoked` per revoked key, the rest instance changes). The one
 * generator of the bench (`--only store-10k`) and the tests (test/helpers/big-store.ts re-exports
 * it with its types, bench/big-store.d.mts).
 */
import { createHash } from 'node:crypto';

const ALNUM = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function keyId(i) {
  let s = '';
  for (let n = i, d = 0; d < 12; d++, n = Math.floor(n / 62)) s = ALNUM[n % 62] + s;
  return s;
}

export function bigStoreData({
  instances: count,
  keys: keyCount,
  events: eventCount,
  at = '2026-11-01T00:00:00.000Z',
}) {
  const instances = Array.from({ length: count }, (_, i) => ({
    id: `big-${i}`,
    deployment: `dep-${i}`,
    model: 'gemma4:26b',
    endpoint: 'http://127.0.0.1:9/v1',
    state: 'ready',
    packEndsAt: null,
    upstreamTokenFile: null,
    createdAt: at,
    updatedAt: at,
  }));
  const events = [];
  const keys = Array.from({ length: keyCount }, (_, i) => {
    const inst = instances[i % count];
    const revoked = i % 5 === 4;
    const id = keyId(i);
    events.push({ seq: events.length + 1, at, type: 'key.created', instance: inst.id, keyId: id, keyName: `k${i}` });
    if (revoked)
      events.push({
        seq: events.length + 1,
        at,
        type: 'key.revoked',
        instance: inst.id,
        keyId: id,
        keyName: `k${i}`,
        reason: 'manual',
      });
    return {
      id,
      name: `k${i}`,
      instance: inst.id,
      deployment: inst.deployment,
      hash: createHash('sha256').update(`big-${i}`).digest('hex'),
      hint: `ob_sk_…${id.slice(-4)}`,
      isDefault: false,
      status: revoked ? 'revoked' : 'active',
      createdAt: at,
      lastUsedAt: null,
      revokedAt: revoked ? at : null,
      revokeReason: revoked ? 'manual' : null,
      usage: {
        requests: i,
        promptTokens: 2 * i,
        completionTokens: 3 * i,
        reasoningTokens: 0,
        errors: 0,
        disconnects: 0,
        estimatedTokens: 0,
        firstUsedAt: null,
      },
      limits: { rpm: null, tpm: null, concurrency: null },
    };
  });
  while (events.length < eventCount) {
    const inst = instances[events.length % count];
    events.push({ seq: events.length + 1, at, type: 'instance.state', instance: inst.id, state: 'ready' });
  }
  return { version: 2, instances, keys, events };
}
