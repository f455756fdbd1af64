/**
 * Instance aliases through the lifecycle and the stores: one commit with its audit event, durable
 * before it is answered, kept across a restart on the file store and PostgreSQL, heard at once by
 * the other daemons of a shared store; records written before aliases existed load with none.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { FileStore } from '../../src/store/file-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import type { Mutation } from '../../src/store/store.js';
import { useLifecycleStores } from '../helpers/lifecycle-stores.js';
import { eventually } from '../helpers/processes.js';

const MODELS = ['gemma4:26b'];
let now = Date.parse('2026-11-23T12:00:00Z');
const clock = { now: () => now };
const { opened, open, database, durable } = useLifecycleStores({ clock, models: MODELS });

const STORES = durable('oba-');

describe.each(STORES)('aliases on the %s store', (_name, factory) => {
  it('are changed in one audited commit, in any state but terminated, and survive a restart', async () => {
    const make = await factory();
    const lc = await open(make());
    const added = await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:11434' });
    expect(added.aliases).toEqual([]);
    const events: AuditEvent[] = [];
    lc.onChange((e) => events.push(e));
    now += 1000;
    const aliased = await lc.alias('gpu-1', { add: ['claude-sonnet-4-5', 'claude-haiku-4-5'] });
    expect(aliased).toMatchObject({
      aliases: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
      updatedAt: new Date(now).toISOString(),
    });
    // What the data plane reads: the registry's record.
    expect(lc.registry.instances.get('gpu-1')!.aliases).toEqual(['claude-sonnet-4-5', 'claude-haiku-4-5']);
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    await lc.halt('gpu-1', 'stop');
    now += 1000;
    await lc.alias('gpu-1', { remove: ['claude-haiku-4-5'], add: ['gpt-4o'] });
    // Nothing to change: nothing written, no event.
    const unchanged = await lc.alias('gpu-1', { add: ['gpt-4o'] });
    expect(unchanged.aliases).toEqual(['claude-sonnet-4-5', 'gpt-4o']);
    await expect(lc.alias('gpu-1', { add: ['gemma4:26b'] })).rejects.toMatchObject({
      code: 'invalid_argument',
      param: 'aliases',
    });
    await expect(lc.alias('nope', { add: ['x'] })).rejects.toMatchObject({ code: 'instance_not_found' });
    expect(events.filter((e) => e.type === 'instance.aliased').map((e) => [e.instance, e.aliases])).toEqual([
      ['gpu-1', ['claude-sonnet-4-5', 'claude-haiku-4-5']],
      ['gpu-1', ['claude-sonnet-4-5', 'gpt-4o']],
    ]);
    await opened.pop()!.close();

    const again = await open(make());
    expect(again.registry.instances.get('gpu-1')).toMatchObject({
      state: 'stopped',
      aliases: ['claude-sonnet-4-5', 'gpt-4o'],
    });
    expect(
      (await again.auditEvents({ limit: 10_000 }))
        .filter((e) => e.type === 'instance.aliased')
        .map((e) => [e.instance, e.aliases]),
    ).toEqual([
      ['gpu-1', ['claude-sonnet-4-5', 'claude-haiku-4-5']],
      ['gpu-1', ['claude-sonnet-4-5', 'gpt-4o']],
    ]);
    await again.halt('gpu-1', 'terminate');
    await expect(again.alias('gpu-1', { clear: true })).rejects.toThrow(
      'Instance "gpu-1" is terminated; its aliases can no longer change. Add a new instance to serve under them.',
    );
  });
});

describe('aliases, shared and old stores', () => {
  it('a change through one daemon reaches the other daemons of a PostgreSQL store', async () => {
    const db = await database();
    const a = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    const b = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    await a.addInstance({ id: 'gpu-1', model: 'gemma4:26b' });
    await eventually(() => b.registry.instances.get('gpu-1'), 'the instance on b');
    const heard: AuditEvent[] = [];
    b.onChange((e, origin) => {
      if (origin === 'remote') heard.push(e);
    });
    now += 1000;
    await a.alias('gpu-1', { add: ['claude-sonnet-4-5'] });
    await eventually(() => b.registry.instances.get('gpu-1')!.aliases.length === 1, 'the alias on b');
    expect(b.registry.instances.get('gpu-1')!.aliases).toEqual(['claude-sonnet-4-5']);
    expect(heard.map((e) => [e.type, e.aliases])).toEqual([['instance.aliased', ['claude-sonnet-4-5']]]);
    // b changes it next, from what it heard: not refused as a stale view.
    now += 1000;
    await b.alias('gpu-1', { clear: true });
    await eventually(() => a.registry.instances.get('gpu-1')!.aliases.length === 0, 'the clear on a');
  });

  it('instances of a PostgreSQL store made before migration 9 get none, as do records heard from an older daemon', async () => {
    const db = await database();
    const lc = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b' });
    await opened.pop()!.close();
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query(`UPDATE ob_instances SET record = record - 'aliases'`);
    await c.query('DELETE FROM ob_schema_migrations WHERE version = 9');
    const again = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    const { rows } = await c.query<{ aliases: unknown }>(`SELECT record->'aliases' AS aliases FROM ob_instances`);
    await c.end();
    expect(rows).toEqual([{ aliases: [] }]);
    expect(again.registry.instances.get('gpu-1')!.aliases).toEqual([]);
    // A daemon of the version before writes its records without the field.
    const { aliases: _none, ...older } = again.registry.instances.get('gpu-1')!;
    await again.applyRemote([{ no: 1, mutations: [{ op: 'putInstance', instance: older } as Mutation] }]);
    expect(again.registry.instances.get('gpu-1')!.aliases).toEqual([]);
  });

  it('a change the store cannot write is refused and changes nothing, in memory or in the trail', async () => {
    const store = new MemoryStore();
    const lc = await open(store);
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b' });
    const events: AuditEvent[] = [];
    lc.onChange((e) => events.push(e));
    store.failWrites = true;
    await expect(lc.alias('gpu-1', { add: ['claude-sonnet-4-5'] })).rejects.toMatchObject({
      code: 'store_write_failed',
    });
    expect(lc.registry.instances.get('gpu-1')!.aliases).toEqual([]);
    expect(events).toEqual([]);
    expect((await store.load()).instances[0]!.aliases).toEqual([]);
  });

  it('a file store written before aliases existed loads with none, and is written with them', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'oba-')), 'db.json');
    const old = new MemoryStore();
    const lc = await open(old);
    await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b' });
    const data = structuredClone(await old.load()) as unknown as { instances: Record<string, unknown>[] };
    delete data.instances[0]!.aliases;
    await writeFile(file, JSON.stringify(data));
    const again = await open(new FileStore(file));
    expect(again.registry.instances.get('gpu-1')!.aliases).toEqual([]);
    now += 1000;
    await again.alias('gpu-1', { add: ['claude-sonnet-4-5'] });
    await opened.pop()!.close();
    const written = JSON.parse(await readFile(file, 'utf8')) as { instances: { aliases: string[] }[] };
    expect(written.instances[0]!.aliases).toEqual(['claude-sonnet-4-5']);
  });
});
