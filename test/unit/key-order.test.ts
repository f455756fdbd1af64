/**
 * KeyOrder: pages after a cursor walk every record once, whatever is added meanwhile; records of
 * the same time keep their arrival order when asked to; a filter that matches few records still
 * answers a page after a bounded look, with a cursor to go on from.
 */
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/domain/key.js';
import { KeyOrder } from '../../src/services/key-order.js';

const rec = (id: string, at: string, instance = 'a'): KeyRecord => ({ id, createdAt: at, instance }) as KeyRecord;

function walk(o: KeyOrder, limit: number, keep: (k: KeyRecord) => boolean = () => true, scan?: number): string[] {
  const ids: string[] = [];
  let after: KeyRecord | null = null;
  const byId = new Map<string, KeyRecord>();
  for (;;) {
    const page = o.page(after, limit, keep, scan);
    for (const k of page.records) ids.push(k.id);
    for (const k of page.records) byId.set(k.id, k);
    if (page.next === null) return ids;
    after = byId.get(page.next) ?? all.get(page.next)!;
  }
}
const all = new Map<string, KeyRecord>();

describe('KeyOrder', () => {
  it('orders by time then id, and a cursor walks every record once in pages', () => {
    const o = new KeyOrder((k) => k.createdAt);
    const recs = [rec('c', 't2'), rec('a', 't2'), rec('b', 't1'), rec('d', 't3')];
    for (const r of recs) all.set(r.id, r);
    o.rebuild(recs);
    expect(walk(o, 1)).toEqual(['b', 'a', 'c', 'd']);
    expect(walk(o, 3)).toEqual(['b', 'a', 'c', 'd']);
    // Added later: the newest at the end, an older one in its place; replaced in place.
    const e = rec('e', 't4');
    const aa = rec('aa', 't2');
    all.set('e', e).set('aa', aa);
    o.put(e);
    o.put(aa);
    const a2 = rec('a', 't2', 'z');
    o.put(a2, recs[1]);
    expect(walk(o, 2)).toEqual(['b', 'a', 'aa', 'c', 'd', 'e']);
    expect(o.page(null, 10, () => true).records[1]).toBe(a2);
    o.remove(aa);
    expect(walk(o, 2)).toEqual(['b', 'a', 'c', 'd', 'e']);
  });

  it('by arrival: records of one time in the order they came', () => {
    const o = new KeyOrder((k) => k.createdAt, true);
    const recs = [rec('z', 't1'), rec('y', 't1'), rec('x', 't0')];
    for (const r of recs) all.set(r.id, r);
    o.rebuild(recs);
    const w = rec('w', 't1');
    all.set('w', w);
    o.put(w);
    expect(walk(o, 1)).toEqual(['x', 'z', 'y', 'w']);
  });

  it('a sparse filter answers after a bounded look, with a cursor that goes on', () => {
    const o = new KeyOrder((k) => k.createdAt);
    const recs = Array.from({ length: 100 }, (_, i) =>
      rec(`k${String(i).padStart(3, '0')}`, 't', i % 25 === 0 ? 'b' : 'a'),
    );
    for (const r of recs) all.set(r.id, r);
    o.rebuild(recs);
    const first = o.page(null, 10, (k) => k.instance === 'b', 30);
    expect(first.records.map((k) => k.id)).toEqual(['k000', 'k025']);
    expect(first.next).toBe('k029');
    expect(walk(o, 10, (k) => k.instance === 'b', 30)).toEqual(['k000', 'k025', 'k050', 'k075']);
  });
});
