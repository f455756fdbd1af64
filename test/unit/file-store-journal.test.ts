/**
 * The file store's journal of commits: each commit one framed, synced append; a
 * torn last line dropped, never half-applied; folded into db.json off the commit path; the audit
 * trail bounded; and, at 10,000 keys and 100,000 events, a key creation or a stop writes a few
 * hundred bytes whatever the store's size, and db.json not at all.
 */
import { mkdtemp, readFile, readdir, rename, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import type { AuditEvent } from '../../src/domain/key.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { frame, readJournal } from '../../src/store/commit-journal-scan.js';
import { FileStore, type FileStoreOptions } from '../../src/store/file-store.js';
import type { StoreData } from '../../src/store/store.js';
import { bigStoreData } from '../helpers/big-store.js';
import { eventually } from '../helpers/processes.js';

const MODELS = ['gemma4:26b'];
const clock = { now: () => Date.parse('2026-11-23T12:00:00Z') };

async function home(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'obj-'));
}

async function open(path: string, options: FileStoreOptions = {}) {
  const notices: string[] = [];
  const store = new FileStore(path, { ...options, onNotice: (m) => notices.push(m) });
  const lc = await LifecycleService.open({ store, clock, secrets: cryptoSecretSource, models: MODELS });
  // The load's fold, if it had one to do, written: what these tests look at in the files.
  await store.folded();
  return { store, lc, notices };
}

async function readyInstance(lc: LifecycleService, id: string): Promise<string> {
  await lc.addInstance({ id, model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
  return (await (
    await lc.ready(id)
  ).defaultKey)!.id;
}

/** What a reopened store holds, compared as a whole. */
async function contents(path: string, options: FileStoreOptions = {}): Promise<{ data: StoreData; notices: string[] }> {
  const notices: string[] = [];
  const store = new FileStore(path, { ...options, onNotice: (m) => notices.push(m) });
  const data = await store.load();
  await store.close();
  return { data, notices };
}

describe('the journal of commits', () => {
  it('a commit is one framed append; db.json is not rewritten; a reopen replays it', async () => {
    const path = join(await home(), 'db.json');
    const { store, lc } = await open(path);
    const dbBefore = await stat(path);
    const keyId = await readyInstance(lc, 'gpu-1');
    const created = await lc.createKey('gpu-1', 'ci');
    const dbAfter = await stat(path);
    expect({ ino: dbAfter.ino, mtimeMs: dbAfter.mtimeMs, size: dbAfter.size }).toEqual({
      ino: dbBefore.ino,
      mtimeMs: dbBefore.mtimeMs,
      size: dbBefore.size,
    });
    const read = await readJournal(`${path}.journal`);
    // addInstance, ready, the default key, the key: one entry each, numbered from 1.
    expect(read?.entries.map((e) => [e.n, e.m.map((m) => m.op)])).toEqual([
      [1, ['putInstance', 'appendEvent']],
      [2, ['putInstance', 'appendEvent']],
      [3, ['putKey', 'appendEvent']],
      [4, ['putKey', 'appendEvent']],
    ]);
    expect(read?.torn).toBe(0);
    // Simulated crash: db.json is read with the journal, without the close's fold.
    const { data } = await contents(path, { readOnly: true });
    expect(data.keys.map((k) => k.id).sort()).toEqual([keyId, created.key.id].sort());
    expect(data.keys.find((k) => k.id === created.key.id)).toEqual(created.key);
    await store.close();
    // A clean close folds: db.json is complete, the journal empty.
    const db = JSON.parse(await readFile(path, 'utf8')) as { through: number; keys: unknown[] };
    expect({ through: db.through, keys: db.keys.length }).toEqual({ through: 4, keys: 2 });
    expect((await stat(`${path}.journal`)).size).toBe(0);
  });

  it('a last line cut off by a crash, or whose checksum fails, is dropped, never half-applied', async () => {
    const path = join(await home(), 'db.json');
    const { lc, store } = await open(path);
    await readyInstance(lc, 'gpu-1');
    const journal = `${path}.journal`;
    const whole = await readFile(journal);
    // The store's own crash: nothing more was written after these bytes.
    await rename(journal, `${journal}.keep`);
    await store.close();
    await rename(`${journal}.keep`, journal);
    const torn = frame({ n: 4, m: [{ op: 'deleteInstance', id: 'gpu-1' }] });
    for (const tail of [
      torn.subarray(0, torn.length - 7),
      Buffer.concat([torn.subarray(0, 20), Buffer.from('X'), torn.subarray(21)]),
    ]) {
      await writeFile(journal, Buffer.concat([whole, tail]));
      const { data, notices } = await contents(path, { readOnly: true });
      expect(data.instances.map((i) => [i.id, i.state])).toEqual([['gpu-1', 'ready']]);
      expect(notices).toEqual([
        expect.stringMatching(
          /ended in a write a crash or a full disk cut off \(\d+ bytes, never acknowledged\); dropped\./,
        ),
      ]);
    }
    // Reopened for writing: the torn bytes are cut off and the next commit follows the last whole one.
    const again = await open(path);
    await again.lc.createKey('gpu-1', 'after');
    await again.store.close();
    const { data } = await contents(path);
    expect(data.keys.map((k) => k.name).sort()).toEqual(['after', 'default']);
  });

  it('a damaged line with whole ones after it is refused, naming the line, and the files are left as they are', async () => {
    const path = join(await home(), 'db.json');
    const { lc } = await open(path);
    await readyInstance(lc, 'gpu-1');
    const journal = `${path}.journal`;
    const lines = (await readFile(journal, 'utf8')).split('\n');
    lines[1] = lines[1]!.replace('"pending"', '"PENDING"');
    await writeFile(journal, lines.join('\n'));
    const store = new FileStore(path);
    await expect(store.load()).rejects.toThrow(
      `The store journal ${journal} line 2 is damaged (its checksum does not match) and has whole entries after it`,
    );
    expect(await readFile(journal, 'utf8')).toBe(lines.join('\n'));
  });

  it('folds into db.json once the journal passes its size, with commits going on meanwhile', async () => {
    const dir = await home();
    const path = join(dir, 'db.json');
    const { lc, store } = await open(path, { foldBytes: 4096 });
    await readyInstance(lc, 'gpu-1');
    const made = await Promise.all(Array.from({ length: 40 }, (_, i) => lc.createKey('gpu-1', `k${i}`)));
    const folded = async (): Promise<void> => {
      await eventually(async () => (await readdir(dir)).every((f) => !/\.journal\.\d+$/.test(f)), 'the fold to finish');
    };
    await folded();
    // A fold begins between commits: the commits made while one ran (more of them on a slow
    // machine) are folded once the next commit comes, so one more is made and its fold awaited.
    made.push(await lc.createKey('gpu-1', 'after'));
    await folded();
    const db = JSON.parse(await readFile(path, 'utf8')) as { through: number; keys: unknown[] };
    expect(db.through).toBeGreaterThan(0);
    expect((await readJournal(`${path}.journal`))!.end).toBeLessThan(4096 + 2048);
    const { data } = await contents(path, { readOnly: true });
    expect(data.keys).toHaveLength(42);
    for (const m of made) expect(data.keys.find((k) => k.id === m.key.id)).toEqual(m.key);
    await store.close();
  });

  it('a fold cut off by a crash (a segment left beside an older db.json) is replayed, and finished at the next start', async () => {
    const dir = await home();
    const path = join(dir, 'db.json');
    const { lc } = await open(path);
    const keyId = await readyInstance(lc, 'gpu-1');
    await lc.revokeKey(keyId);
    // The fold's first step only: the live journal renamed to a segment; db.json not yet written.
    await rename(`${path}.journal`, `${path}.journal.1`);
    const again = await open(path);
    expect(again.lc.registry.keys.get(keyId)).toMatchObject({ status: 'revoked', revokeReason: 'manual' });
    expect(again.notices).toEqual([]);
    expect((await readdir(dir)).sort()).toEqual(['db.json', 'db.json.journal', 'db.json.revocations']);
    await again.store.close();
  });

  it('a db.json restored from before a fold: the journal that does not continue it is set aside, revocations still hold', async () => {
    const dir = await home();
    const path = join(dir, 'db.json');
    const first = await open(path);
    const keyId = await readyInstance(first.lc, 'gpu-1');
    await first.store.close();
    const backup = await readFile(path);
    const second = await open(path);
    await second.lc.revokeKey(keyId);
    await second.lc.addInstance({ id: 'gpu-2', model: 'gemma4:26b' });
    // Folded at this point, and more committed since: a journal that starts after `through`.
    await second.store.close();
    const third = await open(path);
    await third.lc.addInstance({ id: 'gpu-3', model: 'gemma4:26b' });
    await writeFile(path, backup);
    const { data, notices } = await contents(path);
    expect(data.instances.map((i) => i.id)).toEqual(['gpu-1']);
    expect(data.keys.find((k) => k.id === keyId)).toMatchObject({ status: 'revoked', revokeReason: 'manual' });
    expect(notices).toContainEqual(
      expect.stringMatching(
        /^The store journal does not continue .*db\.json \(it holds entry \d+ where \d+ was due: was db\.json restored from an older backup\?\)\. Its files were kept aside as \*\.unused-/,
      ),
    );
    expect((await readdir(dir)).some((f) => /^db\.json\.journal\.unused-/.test(f))).toBe(true);
  });
});

describe('the audit trail, bounded', () => {
  it('db.json keeps the newest events; older ones move to db.json.audit once, in order', async () => {
    const dir = await home();
    const path = join(dir, 'db.json');
    const { lc, store } = await open(path, { auditKeep: 10 });
    const revoked = await readyInstance(lc, 'gpu-0');
    await lc.revokeKey(revoked);
    for (let i = 1; i < 6; i++) await readyInstance(lc, `gpu-${i}`);
    const all = [...lc.registry.events];
    expect(all).toHaveLength(19);
    await store.close();
    const db = JSON.parse(await readFile(path, 'utf8')) as { events: AuditEvent[]; auditArchived: { seq: number } };
    expect(db.events).toEqual(all.slice(-10));
    expect(db.auditArchived.seq).toBe(9);
    const archived = (await readFile(`${path}.audit`, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as AuditEvent);
    expect(archived).toEqual(all.slice(0, 9));
    // Reopened: the key whose key.revoked event went to the archive is not "repaired" (no
    // event added again, no notice); folded again, nothing is archived twice.
    const again = await open(path, { auditKeep: 10 });
    expect(again.notices).toEqual([]);
    expect(again.lc.registry.keys.get(revoked)).toMatchObject({ status: 'revoked' });
    expect(again.lc.registry.events.map((e) => e.seq)).toEqual(all.slice(-10).map((e) => e.seq));
    await readyInstance(again.lc, 'gpu-6');
    await again.store.close();
    const archivedAgain = (await readFile(`${path}.audit`, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as AuditEvent).seq);
    expect(archivedAgain).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });
});

describe('10,000 keys and 100,000 audit events', () => {
  /** Bytes each file gained, and whether db.json was replaced, over one operation. */
  async function cost(path: string, op: () => Promise<unknown>): Promise<{ journal: number; dbRewritten: boolean }> {
    const db0 = await stat(path);
    // Bytes of entries, not the file's size: zeros are written ahead of them.
    const j0 = (await readJournal(`${path}.journal`))!.end;
    await op();
    const db1 = await stat(path);
    return {
      journal: (await readJournal(`${path}.journal`))!.end - j0,
      dbRewritten: db1.ino !== db0.ino || db1.mtimeMs !== db0.mtimeMs,
    };
  }

  async function measure(data: StoreData | null): Promise<{
    create: { journal: number; dbRewritten: boolean };
    stop: { journal: number; dbRewritten: boolean };
    dbBytes: number;
    eventsHeld: number;
  }> {
    const dir = await home();
    const path = join(dir, 'db.json');
    if (data !== null) await writeFile(path, JSON.stringify(data));
    const { lc, store } = await open(path);
    const eventsHeld = (await lc.auditEvents({ limit: 100_000 })).length;
    // The stop revokes the instance's 9 active keys (as in the big store: 100 keys an instance, a fifth revoked).
    await lc.addInstance({ id: 'target', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
    await (
      await lc.ready('target')
    ).defaultKey;
    for (let i = 0; i < 8; i++) await lc.createKey('target', `t${i}`);
    const create = await cost(path, () => lc.createKey('target', 'measured'));
    const stop = await cost(path, () => lc.halt('target', 'stop'));
    const dbBytes = (await stat(path)).size;
    await store.close();
    return { create, stop, dbBytes, eventsHeld };
  }

  it('a key creation and a stop write the same few bytes as on an empty store, and never db.json', async () => {
    const big = bigStoreData({ instances: 100, keys: 10_000, events: 100_000 });
    const small = await measure(null);
    const large = await measure(big);
    expect(large.dbBytes).toBeGreaterThan(3_000_000);
    // Loaded, the 100,000 events were cut to the newest 10,000 in the store (the rest archived).
    expect(large.eventsHeld).toBe(10_000);
    for (const r of [small, large]) expect([r.create.dbRewritten, r.stop.dbRewritten]).toEqual([false, false]);
    // The same entry on either store, but for the digits of larger event and entry numbers.
    expect(Math.abs(large.create.journal - small.create.journal)).toBeLessThanOrEqual(16);
    expect(large.create.journal).toBeLessThan(1024);
    // A stop's entry: the instance, its 9 keys and 10 events.
    expect(Math.abs(large.stop.journal - small.stop.journal)).toBeLessThanOrEqual(16 * 10);
    expect(large.stop.journal).toBeLessThan(10 * 1024);
  }, 120_000);
});
