/**
 * The lifecycle's one commit path: a change is written with its audit event, then applied to the
 * registry, then told to listeners; a failed write changes nothing anyone can see. And the
 * registry everyone else holds is read only (checked by tsc: see the @ts-expect-error lines).
 */
import { describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import type { AuditEvent } from '../../src/domain/key.js';
import { obError } from '../../src/errors.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { UnwrittenAtShutdownError } from '../../src/services/unwritten.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Mutation, StoreData } from '../../src/store/store.js';
import { startHarness } from '../reliability/harness.js';

const MODEL = 'gemma4:26b';
const T0 = Date.parse('2026-11-23T12:00:00Z');
const clock = { now: () => T0 };

/** A memory store whose writes fail while `failing` is set, as a full disk would. */
class FlakyStore extends MemoryStore {
  failing = false;
  readonly commits: Mutation[][] = [];
  override async commit(mutations: readonly Mutation[]): Promise<void> {
    if (this.failing) throw obError('store_write_failed', { message: 'The store could not be written (ENOSPC).' });
    this.commits.push([...mutations]);
    return super.commit(mutations);
  }
}

async function open() {
  const store = new FlakyStore();
  const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: [MODEL] });
  const heard: AuditEvent[] = [];
  lc.onChange((e) => heard.push(e));
  return { store, lc, heard };
}

/** What anyone outside the lifecycle can see of its state. */
function visible(lc: LifecycleService) {
  return structuredClone({
    instances: [...lc.registry.instances.values()],
    keys: [...lc.registry.keys.values()],
    events: [...lc.registry.events],
  });
}

describe('LifecycleService.commit', () => {
  it('writes the change with its event in one commit, then applies it, then emits it once', async () => {
    const { store, lc, heard } = await open();
    const seen: string[] = [];
    // A listener sees the state its event describes.
    lc.onChange((e) => seen.push(`${e.type}:${lc.registry.instances.get(e.instance)?.state ?? 'none'}`));
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:11434' });
    expect(store.commits).toHaveLength(1);
    expect(store.commits[0]!.map((m) => m.op)).toEqual(['putInstance', 'appendEvent']);
    expect(heard.map((e) => [e.seq, e.type])).toEqual([[1, 'instance.added']]);
    expect(seen).toEqual(['instance.added:pending']);
    expect(lc.registry.events).toEqual(heard);
  });

  it('copies records into the registry: what the store was handed is not what requests read', async () => {
    const { store, lc } = await open();
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:11434' });
    const written = store.commits[0]![0] as Extract<Mutation, { op: 'putInstance' }>;
    expect(lc.registry.instances.get('gpu-1')).toEqual(written.instance);
    expect(lc.registry.instances.get('gpu-1')).not.toBe(written.instance);
  });

  it('a failed write changes nothing: add, ready, extend, create, limits and reveal', async () => {
    const { store, lc, heard } = await open();
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:11434' });
    const ready = await lc.ready('gpu-1');
    const key = (await ready.defaultKey)!;
    const before = visible(lc);
    const heardBefore = heard.length;
    store.failing = true;
    const attempts: [string, () => Promise<unknown>][] = [
      ['add', () => lc.addInstance({ id: 'gpu-2', model: MODEL })],
      ['extend', () => lc.extend('gpu-1', '2026-12-01T00:00:00Z')],
      ['pending', () => lc.pending('gpu-1')],
      ['create', () => lc.createKey('gpu-1', 'ci')],
      ['limits', () => lc.setKeyLimits(key.id, { rpm: 60 })],
      ['reveal', () => lc.revealKey(key.id)],
    ];
    for (const [name, attempt] of attempts) {
      const err = await attempt().then(
        () => null,
        (e: unknown) => e as { code: string },
      );
      expect({ name, code: err?.code }).toEqual({ name, code: 'store_write_failed' });
    }
    expect(visible(lc)).toEqual(before);
    expect(heard).toHaveLength(heardBefore);
    // The secret waits for the reveal the failed write refused.
    expect(lc.hasUndisplayedSecret(key.id)).toBe(true);
    store.failing = false;
    expect((await lc.revealKey(key.id)).secret).toMatch(/^ob_sk_/);
    expect(lc.hasUndisplayedSecret(key.id)).toBe(false);
  });

  it('a key created is the very record the registry holds, so a later change reaches its holder', async () => {
    const { lc } = await open();
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:11434' });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const { key } = await lc.createKey('gpu-1', 'ci');
    expect(lc.registry.keys.get(key.id)).toBe(key);
    await lc.setKeyLimits(key.id, { rpm: 5 });
    expect(key.limits).toEqual({ rpm: 5, tpm: null, concurrency: null });
  });

  it('the registry handed out is read only', async () => {
    const { lc } = await open();
    const registry = lc.registry;
    // @ts-expect-error only the lifecycle changes instances
    expect(registry.instances.set).toBeTypeOf('function');
    // @ts-expect-error only the lifecycle puts keys
    expect(registry.putKey).toBeTypeOf('function');
    // @ts-expect-error the audit trail is appended to by the lifecycle alone
    expect(registry.events.push).toBeTypeOf('function');
  });
});

describe('LifecycleService.close', () => {
  it('a final write that fails rejects naming what is lost; one that succeeds writes it', async () => {
    const { store, lc } = await open();
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:11434' });
    const { key } = await (async () => {
      await (
        await lc.ready('gpu-1')
      ).defaultKey;
      return lc.createKey('gpu-1', 'ci');
    })();
    store.failing = true;
    await expect(lc.revokeKey(key.id)).rejects.toMatchObject({ code: 'store_write_failed' });
    // Revoked in memory all the same.
    expect(lc.registry.keys.get(key.id)!.status).toBe('revoked');
    const err = await lc.close().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(UnwrittenAtShutdownError);
    expect((err as UnwrittenAtShutdownError).unwritten.revocations).toEqual([
      { keyId: key.id, instance: 'gpu-1', reason: 'manual', journaled: false },
    ]);
    expect((err as Error).message).toContain(`${key.id} (instance gpu-1, manual)`);
    store.failing = false;
    await lc.close();
    const stored: StoreData = await store.load();
    expect(stored.keys.find((k) => k.id === key.id)).toMatchObject({ status: 'revoked', revokeReason: 'manual' });
  });
});

describe('a daemon whose final write fails', () => {
  it('logs what it could not write and rejects its shutdown (exit non-zero), never swallowing it', async () => {
    const store = new FlakyStore();
    const h = await startHarness({}, { store });
    const lc = h.daemon.ctx.lifecycle;
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:9' });
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    const { key } = await lc.createKey('gpu-1', 'ci');
    store.failing = true;
    await expect(lc.revokeKey(key.id)).rejects.toMatchObject({ code: 'store_write_failed' });
    const err = await h.daemon.shutdown(0).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(UnwrittenAtShutdownError);
    const logged = h.logs.filter((l) => l.level === 50);
    expect(logged).toEqual([
      expect.objectContaining({
        msg: err!.message,
        unwritten: {
          revocations: [{ keyId: key.id, instance: 'gpu-1', reason: 'manual', journaled: false }],
          instances: [],
          other: 1,
        },
      }),
    ]);
    expect(logged.some((l) => l.msg === 'stopped')).toBe(false);
  });
});
