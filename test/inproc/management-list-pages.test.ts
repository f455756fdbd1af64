/**
 * The key and revocation lists a page at a time: a cursor walks every record once, in order,
 * filters hold on every page, a key added between two pages comes at the end, and the whole list
 * (one JSON array, or JSON lines) is the pages joined. The audit trail is read from the store,
 * not from the few events the daemon holds. The instance list, longer than a piece, sent whole.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InstanceView, KeyView, RevocationView } from '../../src/wire/views.js';
import { STREAM_PAGE } from '../../daemon/management/list-pages.js';
import { HELD_EVENTS } from '../../src/services/registry.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { bigStoreData } from '../helpers/big-store.js';
import { type Inproc, buildInproc } from '../helpers/inproc.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

const KEYS = 2500;
const EVENTS = 3 * HELD_EVENTS;
let d: Inproc;
const data = bigStoreData({ instances: 10, keys: KEYS, events: EVENTS });
// bigStoreData makes every key at one time and revokes every fifth: by creation is by id, by
// revocation the order the store holds them in.
const allIds = data.keys.map((k) => k.id).sort();
const revokedIds = data.keys.filter((k) => k.status === 'revoked').map((k) => k.id);

beforeAll(async () => {
  d = await buildInproc({}, {}, new MemoryStore(data));
});

afterAll(async () => {
  await d?.close();
});

async function walk<T>(
  path: string,
  field: 'keys' | 'revocations',
  limit: number,
): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let after: string | null = null;
  let pages = 0;
  const sep = path.includes('?') ? '&' : '?';
  for (;;) {
    const res = await d.manage('GET', `${path}${sep}limit=${limit}${after === null ? '' : `&after=${after}`}`);
    expect(res.status).toBe(200);
    const page = res.json as Record<string, T[]> & { next: string | null };
    items.push(...page[field]!);
    pages++;
    if (page.next === null) return { items, pages };
    after = page.next;
  }
}

describe('GET /v1/keys a page at a time', () => {
  it('a cursor walks every key once, by creation, in pages of the size asked', async () => {
    const { items, pages } = await walk<KeyView>('/v1/keys', 'keys', 1000);
    expect(pages).toBe(3);
    expect(items.map((k) => k.id)).toEqual(allIds);
  });

  it('filters hold on every page: one instance, one status', async () => {
    // Every fifth key revoked, over ten instances: big-4's keys are all revoked, big-3's all active.
    const { items } = await walk<KeyView>('/v1/keys?instance=big-4&status=revoked', 'keys', 7);
    const expected = data.keys
      .filter((k) => k.instance === 'big-4')
      .map((k) => k.id)
      .sort();
    expect(expected.length).toBe(KEYS / 10);
    expect(items.map((k) => k.id)).toEqual(expected);
    expect((await d.manage('GET', '/v1/keys?instance=big-3&status=revoked&limit=7')).json).toEqual({
      keys: [],
      next: null,
    });
    const active = await walk<KeyView>('/v1/keys?status=active', 'keys', 600);
    expect(active.items.map((k) => k.id)).toEqual(
      data.keys
        .filter((k) => k.status === 'active')
        .map((k) => k.id)
        .sort(),
    );
  });

  it('the whole list is the pages joined, as one JSON array or as JSON lines', async () => {
    const { items } = await walk<KeyView>('/v1/keys', 'keys', 10_000);
    const whole = await d.manage('GET', '/v1/keys');
    expect(whole.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(whole.json).toEqual(items);
    const lines = await d.manage('GET', '/v1/keys?format=lines');
    expect(lines.headers['content-type']).toBe('application/x-ndjson');
    expect(lines.text.endsWith('\n')).toBe(true);
    expect(
      lines.text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as KeyView),
    ).toEqual(items);
  });

  it('a key made between two pages comes at the end, and no key is listed twice', async () => {
    const first = (await d.manage('GET', '/v1/keys?limit=2000')).json as { keys: KeyView[]; next: string };
    d.clock.advance(60_000);
    const made = await d.manage('POST', '/v1/keys', { instance: 'big-0', name: 'late' });
    expect(made.status).toBe(201);
    const rest = (await d.manage('GET', `/v1/keys?limit=2000&after=${first.next}`)).json as {
      keys: KeyView[];
      next: string | null;
    };
    expect(rest.next).toBeNull();
    const ids = [...first.keys, ...rest.keys].map((k) => k.id);
    expect(ids).toEqual([...allIds, (made.json as KeyView).id]);
  });

  it('refuses a limit out of range and a cursor that names no key', async () => {
    for (const limit of ['0', '10001', '1.5', 'x']) {
      const res = await d.manage('GET', `/v1/keys?limit=${limit}`);
      expect([res.status, (res.json as { error: { code: string; param: string } }).error]).toMatchObject([
        400,
        { code: 'invalid_argument', param: 'limit' },
      ]);
    }
    const res = await d.manage('GET', '/v1/keys?limit=5&after=nosuchkey000');
    expect([res.status, (res.json as { error: { param: string } }).error.param]).toEqual([400, 'after']);
  });
});

describe('GET /v1/revocations a page at a time', () => {
  it('walks every revoked key once, in the order they were revoked; the whole list agrees', async () => {
    const { items } = await walk<RevocationView>('/v1/revocations', 'revocations', 128);
    expect(items.map((r) => r.keyId)).toEqual(revokedIds);
    expect(items[0]).toEqual({
      keyId: revokedIds[0],
      name: 'k4',
      instance: 'big-4',
      revokedAt: '2026-11-01T00:00:00.000Z',
      reason: 'manual',
    });
    expect((await d.manage('GET', '/v1/revocations')).json).toEqual(items);
  });

  it('a key revoked now comes after the older revocations', async () => {
    d.clock.advance(60_000);
    const id = allIds[0]!;
    expect((await d.manage('POST', `/v1/keys/${id}/revoke`, {})).status).toBe(200);
    const { items } = await walk<RevocationView>('/v1/revocations?instance=big-0', 'revocations', 3);
    expect(items.map((r) => r.keyId)).toEqual([
      ...data.keys.filter((k) => k.status === 'revoked' && k.instance === 'big-0').map((k) => k.id),
      id,
    ]);
  });
});

describe('a page of MAX_PAGE keys', () => {
  it('is sent in pieces: the body is the page as JSON.stringify writes it, other callbacks run between', async () => {
    for (const path of [`/v1/keys?limit=${KEYS}`, `/v1/revocations?limit=${KEYS}`]) {
      const ticks = turnsDuring();
      const res = await d.manage('GET', path);
      const turns = ticks.stop();
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      const page = res.json as Record<string, unknown[]>;
      const field = path.startsWith('/v1/keys') ? 'keys' : 'revocations';
      expect(Object.keys(page)).toEqual([field, 'next']);
      expect(res.text).toBe(JSON.stringify(page));
      expect(turns).toBeGreaterThanOrEqual(Math.floor(page[field]!.length / STREAM_PAGE));
    }
  });
});

describe('the audit trail', () => {
  it('is read from the store; the daemon holds only the newest events', async () => {
    expect(d.daemon.ctx.lifecycle.registry.events.length).toBeLessThanOrEqual(2 * HELD_EVENTS);
    const trail = (await d.manage('GET', '/v1/audit?limit=10000')).json as { seq: number }[];
    // The big store's events, and those the tests above added (a key.created and a key.revoked).
    expect(trail.length).toBe(EVENTS + 2);
    expect(trail.slice(0, 3).map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it('is sent in pieces: the body is the events as one JSON array, other callbacks run between', async () => {
    const events = await d.daemon.ctx.lifecycle.auditEvents({ limit: 10_000 });
    const ticks = turnsDuring();
    const res = await d.manage('GET', '/v1/audit?limit=10000');
    const turns = ticks.stop();
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.text).toBe(JSON.stringify(events));
    expect(turns).toBeGreaterThanOrEqual(Math.floor(events.length / STREAM_PAGE));
  });
});

describe('GET /v1/instances', () => {
  it('sends more instances than a piece holds as one JSON array, by creation then id', async () => {
    const many = bigStoreData({ instances: 2 * STREAM_PAGE + 7, keys: 2 * STREAM_PAGE + 7, events: 0 });
    // Two creation times, the later one first in the store: the list is by time, then by id.
    // The memory store is not read through the validation, which gives a record its aliases.
    many.instances.forEach((inst, i) => {
      Object.assign(inst, { aliases: [] });
      if (i % 2 === 0) inst.createdAt = '2026-11-02T00:00:00.000Z';
    });
    const own = await buildInproc({}, {}, new MemoryStore(many));
    try {
      const res = await own.manage('GET', '/v1/instances');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      const list = res.json as InstanceView[];
      const expected = [...many.instances]
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
        // One key an instance, every fifth revoked.
        .map((i) => ({ id: i.id, createdAt: i.createdAt, activeKeys: Number(i.id.slice(4)) % 5 === 4 ? 0 : 1 }));
      expect(list.map((i) => ({ id: i.id, createdAt: i.createdAt, activeKeys: i.activeKeys }))).toEqual(expected);
      expect(list[0]).toEqual({
        id: expected[0]!.id,
        model: 'gemma4:26b',
        aliases: [],
        endpoint: 'http://127.0.0.1:9/v1',
        state: 'ready',
        packEndsAt: null,
        upstreamTokenFile: null,
        activeKeys: expected[0]!.activeKeys,
        createdAt: '2026-11-01T00:00:00.000Z',
        updatedAt: '2026-11-01T00:00:00.000Z',
        health: null,
      });
    } finally {
      await own.close();
    }
  });

  it('sorts the instances in pieces: other callbacks run while it sorts, not only between pieces sent', async () => {
    const n = 8 * STREAM_PAGE;
    const many = bigStoreData({ instances: n, keys: n, events: 0 });
    // The store's order reversed: the sort has every comparison to make.
    many.instances.reverse().forEach((inst) => Object.assign(inst, { aliases: [] }));
    const own = await buildInproc({}, {}, new MemoryStore(many));
    try {
      const ticks = turnsDuring();
      const res = await own.manage('GET', '/v1/instances');
      const turns = ticks.stop();
      expect(res.status).toBe(200);
      expect((res.json as InstanceView[]).map((i) => i.id)).toEqual(many.instances.map((i) => i.id).sort());
      // Sending alone waits n / STREAM_PAGE turns; the sort's comparisons (n log n) as many again and more.
      expect(turns).toBeGreaterThanOrEqual(2 * (n / STREAM_PAGE));
    } finally {
      await own.close();
    }
  });
});
