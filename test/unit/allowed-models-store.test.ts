/**
 * The allowed models through the lifecycle and the stores: a change is one commit with its audit
 * event, kept across a restart on the file store and PostgreSQL, heard at once by the other
 * daemons of a shared store (whose `instances add` then checks it), and never a race between
 * daemons: the database refuses a list decided from a stale one, an instance of a model
 * disallowed meanwhile, and a disallow of a model an unheard-of instance runs.
 */
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { FileStore } from '../../src/store/file-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { PostgresStore } from '../../src/store/postgres-store.js';
import { useLifecycleStores } from '../helpers/lifecycle-stores.js';
import { eventually } from '../helpers/processes.js';

const DEFAULT = ['gemma4:26b', 'qwen3.6:27b'];
const now = Date.parse('2026-11-23T12:00:00Z');
const clock = { now: () => now };
const { opened, open, database, durable } = useLifecycleStores({ clock, models: DEFAULT });

const STORES = durable('obm-');

describe.each(STORES)('the allowed models on the %s store', (_name, factory) => {
  it('start as the daemon was started with, change in one audited commit each, and survive a restart', async () => {
    const make = await factory();
    const lc = await open(make());
    expect([lc.models, lc.modelsSource]).toEqual([DEFAULT, 'start']);
    await expect(lc.addInstance({ id: 'llama-1', model: 'llama3.1:8b' })).rejects.toMatchObject({
      code: 'unknown_model',
      message:
        'Model "llama3.1:8b" is not allowed: the allowed models are gemma4:26b, qwen3.6:27b. Allow it first with `ob-proxy models allow llama3.1:8b`.',
    });
    const events: AuditEvent[] = [];
    lc.onChange((e) => events.push(e));
    // Nothing to change: nothing written, the list still this daemon's own.
    expect(await lc.changeModels({ allow: ['gemma4:26b'] })).toEqual(DEFAULT);
    expect(lc.modelsSource).toBe('start');
    expect(await lc.changeModels({ allow: ['llama3.1:8b'] })).toEqual([...DEFAULT, 'llama3.1:8b']);
    expect(lc.modelsSource).toBe('store');
    await lc.addInstance({ id: 'llama-1', model: 'llama3.1:8b' });
    await expect(lc.changeModels({ disallow: ['llama3.1:8b'] })).rejects.toMatchObject({ code: 'model_in_use' });
    expect(await lc.changeModels({ disallow: ['qwen3.6:27b'] })).toEqual(['gemma4:26b', 'llama3.1:8b']);
    expect(events.filter((e) => e.type !== 'instance.added').map((e) => [e.type, e.instance, e.models])).toEqual([
      ['models.changed', '', ['gemma4:26b', 'qwen3.6:27b', 'llama3.1:8b']],
      ['models.changed', '', ['gemma4:26b', 'llama3.1:8b']],
    ]);
    await opened.pop()!.close();

    // The store's list wins over the list the daemon was started with.
    const again = await open(make(), ['qwen3.6:27b']);
    expect([again.models, again.modelsSource]).toEqual([['gemma4:26b', 'llama3.1:8b'], 'store']);
    expect(
      (await again.auditEvents({ limit: 10_000 })).filter((e) => e.type === 'models.changed').map((e) => e.models),
    ).toEqual([
      ['gemma4:26b', 'qwen3.6:27b', 'llama3.1:8b'],
      ['gemma4:26b', 'llama3.1:8b'],
    ]);
    await again.halt('llama-1', 'terminate');
    expect(await again.changeModels({ disallow: ['llama3.1:8b'] })).toEqual(['gemma4:26b']);
  });
});

describe('the allowed models, shared and written', () => {
  it('a change through one daemon reaches the others at once, and their instances add checks it', async () => {
    const db = await database();
    const a = await open(new PostgresStore(db.url, { catchupMs: 100 }));
    const b = await open(new PostgresStore(db.url, { catchupMs: 100 }), ['gemma4:26b']);
    const heard: AuditEvent[] = [];
    b.onChange((e, origin) => {
      if (origin === 'remote') heard.push(e);
    });
    await a.changeModels({ allow: ['llama3.1:8b'] });
    await eventually(() => b.models.includes('llama3.1:8b'), 'the list on b');
    expect([b.models, b.modelsSource]).toEqual([[...DEFAULT, 'llama3.1:8b'], 'store']);
    expect(heard.map((e) => [e.type, e.models])).toEqual([['models.changed', [...DEFAULT, 'llama3.1:8b']]]);
    await b.addInstance({ id: 'llama-1', model: 'llama3.1:8b' });
    // b changes the list next, from what it heard: not refused as a stale view.
    await b.changeModels({ disallow: ['qwen3.6:27b'] });
    await eventually(() => a.models.length === 2, 'the disallow on a');
    await expect(a.changeModels({ disallow: ['llama3.1:8b'] })).rejects.toMatchObject({
      code: 'model_in_use',
      message:
        'llama3.1:8b cannot be disallowed: instance llama-1 runs it. Terminate or remove it first (`ob-proxy instances terminate ID`). Nothing was changed.',
    });
  });

  it('the database refuses a list decided from a stale one, and each side of a disallow and an add racing', async () => {
    const db = await database();
    const store = new PostgresStore(db.url, { catchupMs: 100 });
    const lc = await open(store);
    await lc.changeModels({ allow: ['llama3.1:8b'] });
    // Another daemon, deciding before it heard that change.
    await expect(
      store.commit([{ op: 'setModels', models: ['gemma4:26b'], prev: null, disallowed: ['qwen3.6:27b'] }]),
    ).rejects.toMatchObject({
      code: 'invalid_transition',
      message:
        'The allowed models were changed through another daemon meanwhile (now gemma4:26b, qwen3.6:27b, llama3.1:8b); nothing was changed. Look again with `ob-proxy models list` and retry.',
    });
    // An instance added through a daemon that had not heard the model was disallowed.
    await lc.changeModels({ disallow: ['qwen3.6:27b'] });
    const stale = {
      ...(await lc.addInstance({ id: 'gpu-1', model: 'gemma4:26b' })),
      id: 'gpu-2',
      model: 'qwen3.6:27b',
    };
    await expect(store.commit([{ op: 'putInstance', instance: stale }])).rejects.toMatchObject({
      code: 'unknown_model',
      message:
        'Model "qwen3.6:27b" was disallowed through another daemon meanwhile: the allowed models are gemma4:26b, llama3.1:8b. Nothing was changed.',
    });
    // A disallow decided before hearing of an instance of the model.
    await store.commit([{ op: 'putInstance', instance: { ...stale, id: 'llama-1', model: 'llama3.1:8b' } }]);
    await expect(
      store.commit([
        { op: 'setModels', models: ['gemma4:26b'], prev: ['gemma4:26b', 'llama3.1:8b'], disallowed: ['llama3.1:8b'] },
      ]),
    ).rejects.toMatchObject({
      code: 'model_in_use',
      message:
        'llama3.1:8b cannot be disallowed: instance llama-1 was added with it through another daemon meanwhile. Nothing was changed.',
    });
  });

  it('a change the store cannot write is refused and changes nothing', async () => {
    const store = new MemoryStore();
    const lc = await open(store);
    const events: AuditEvent[] = [];
    lc.onChange((e) => events.push(e));
    store.failWrites = true;
    await expect(lc.changeModels({ allow: ['llama3.1:8b'] })).rejects.toMatchObject({ code: 'store_write_failed' });
    expect([lc.models, lc.modelsSource, events]).toEqual([DEFAULT, 'start', []]);
    expect((await store.load()).models).toBeUndefined();
  });

  it('db.json holds the list once set, and a store without one reads as never set', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'obm-')), 'db.json');
    const lc = await open(new FileStore(file));
    await opened.pop()!.close();
    expect(JSON.parse(await readFile(file, 'utf8'))).not.toHaveProperty('models');
    const again = await open(new FileStore(file));
    await again.changeModels({ allow: ['llama3.1:8b'] });
    await opened.pop()!.close();
    expect((JSON.parse(await readFile(file, 'utf8')) as { models: unknown }).models).toEqual([
      ...DEFAULT,
      'llama3.1:8b',
    ]);
    expect(lc.models).toEqual(DEFAULT);
    // `store migrate` carries it into PostgreSQL.
    const read = new FileStore(file, { readOnly: true });
    const data = await read.load();
    await read.close();
    const db = await database();
    const pgStore = new PostgresStore(db.url, { catchupMs: 100 });
    opened.push(pgStore);
    await pgStore.replaceAll(data, false);
    expect((await pgStore.load()).models).toEqual([...DEFAULT, 'llama3.1:8b']);
  });
});
