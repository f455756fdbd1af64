import type { KeyRecord } from '../domain/key.js';

/**
 * Key records in one order, (`at(record)`, id), for lists read a page at a time: a page after a
 * cursor (the last id of the page before) is a binary search and a slice, whatever the number of
 * keys, so no listing holds the event loop for longer than its page takes. The order is made once
 * at load (`rebuild`); a record added later is usually the newest and goes at the end.
 */
export class KeyOrder {
  private list: KeyRecord[] = [];
  /** `byArrival`: each id's place among records of the same time, in the order they came. */
  private readonly ranks: Map<string, number> | null;
  private nextRank = 0;

  /**
   * `byArrival`: records of the same time in the order they were put (a stop's revocations in the
   * order it made them), else by id.
   */
  constructor(
    private readonly at: (k: KeyRecord) => string,
    byArrival = false,
  ) {
    this.ranks = byArrival ? new Map() : null;
  }

  get size(): number {
    return this.list.length;
  }

  /** The order made anew from `records` (ties in their order when by arrival). */
  rebuild(records: Iterable<KeyRecord>): void {
    this.ranks?.clear();
    this.nextRank = 0;
    const list = [...records];
    if (this.ranks !== null) for (const k of list) this.ranks.set(k.id, this.nextRank++);
    this.list = list.sort((a, b) => this.compare(a, b));
  }

  private tie(id: string): number | string {
    return this.ranks === null ? id : (this.ranks.get(id) ?? Infinity);
  }

  private compare(a: KeyRecord, b: KeyRecord): number {
    const x = this.at(a);
    const y = this.at(b);
    if (x !== y) return x < y ? -1 : 1;
    const p = this.tie(a.id);
    const q = this.tie(b.id);
    return p === q ? 0 : p < q ? -1 : 1;
  }

  /** The index of the first record at or after (`at`, the tie of `id`). */
  private lowerBound(at: string, id: string): number {
    const t = this.tie(id);
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const m = this.list[mid]!;
      const x = this.at(m);
      if (x < at || (x === at && this.tie(m.id) < t)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Adds a record, or replaces the one of its id that `was` is (same position if its place is unchanged). */
  put(record: KeyRecord, was?: KeyRecord): void {
    if (was !== undefined) {
      const i = this.lowerBound(this.at(was), was.id);
      if (this.list[i]?.id === was.id) {
        if (this.at(was) === this.at(record)) {
          this.list[i] = record;
          return;
        }
        this.list.splice(i, 1);
      }
    }
    if (this.ranks !== null && !this.ranks.has(record.id)) this.ranks.set(record.id, this.nextRank++);
    const last = this.list[this.list.length - 1];
    if (last === undefined || this.compare(last, record) < 0) this.list.push(record);
    else this.list.splice(this.lowerBound(this.at(record), record.id), 0, record);
  }

  remove(record: KeyRecord): void {
    const i = this.lowerBound(this.at(record), record.id);
    if (this.list[i]?.id === record.id) this.list.splice(i, 1);
    this.ranks?.delete(record.id);
  }

  /**
   * Up to `limit` records that `keep` accepts, after `after` (a record of this order; null: from
   * the first), and whether more remain. At most `scan` records are looked at, so a filter that
   * matches few keys still answers in bounded time: `next` is then where to go on from.
   */
  page(
    after: KeyRecord | null,
    limit: number,
    keep: (k: KeyRecord) => boolean,
    scan = Math.max(limit * 64, 65_536),
  ): { records: KeyRecord[]; next: string | null } {
    let i = after === null ? 0 : this.lowerBound(this.at(after), after.id);
    if (after !== null && this.list[i]?.id === after.id) i++;
    const records: KeyRecord[] = [];
    const end = Math.min(this.list.length, i + scan);
    for (; i < end && records.length < limit; i++) {
      const k = this.list[i]!;
      if (keep(k)) records.push(k);
    }
    // More remain past the last one looked at (a page cut short by the scan ends at that one).
    if (i >= this.list.length) return { records, next: null };
    const last = records.length === limit ? records[records.length - 1]! : this.list[i - 1]!;
    return { records, next: last.id };
  }
}
