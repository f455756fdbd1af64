import type { Instance } from '../domain/instance.js';
import { type KeyRecord, type KeyUsage, addUsage, emptyUsage } from '../domain/key.js';
import { addByRoute } from '../domain/route-usage.js';

/** A key's or a pack's counters (KeyUsage), with its last use. */
export interface UsageCounts extends KeyUsage {
  lastUsedAt: string | null;
}

export interface KeyUsageRow extends UsageCounts {
  id: string;
  name: string;
  status: KeyRecord['status'];
}

/**
 * One pack: a deployment of an instance (`instances add` starts one; `remove` ends it). Its keys
 * never outlive it, so their counters are the pack's. `state` is `removed` once the deployment
 * is gone (the instance removed, or its id added again for another rental).
 */
export interface PackUsage {
  instance: string;
  deployment: string;
  model: string | null;
  state: Instance['state'] | 'removed';
  packEndsAt: string | null;
  keys: KeyUsageRow[];
  /** The sum over `keys` (the keys shown: all of the pack's unless --key or --since left some out). */
  total: UsageCounts;
}

export interface UsageReport {
  since: string | null;
  packs: PackUsage[];
}

/** A page of the report (`limit`, `after`): the packs of the page's keys; `next`, the cursor of the page after it. */
export interface UsageReportPage extends UsageReport {
  next: string | null;
}

/**
 * One key's usage with its pack, a JSON line of the whole report (`format=lines`, `usage --all`):
 * the lines of one pack are not together, so each names it.
 */
export type UsageLine = Omit<PackUsage, 'keys' | 'total'> & KeyUsageRow;

export interface UsageFilter {
  instance?: string | undefined;
  key?: string | undefined;
  /** Keys last used at or after this time (ISO 8601, UTC). */
  since?: string | undefined;
}

/** The counters with their last use, the split by route last (a copy, in report order: the request path changes the key's in place). */
function counts(u: KeyUsage, lastUsedAt: string | null): UsageCounts {
  const { byRoute, ...totals } = u;
  return { ...totals, lastUsedAt, byRoute: addByRoute({}, byRoute) };
}

function later(a: string | null, b: string | null): string | null {
  return a === null || (b !== null && b > a) ? b : a;
}

/** A pack's own fields, before its keys and total. */
export type PackHead = Omit<PackUsage, 'keys' | 'total'>;

/** The pack a key belongs to, as it is now: `removed` once its deployment is gone. */
export function packOf(instances: ReadonlyMap<string, Instance>, k: KeyRecord): PackHead {
  const inst = instances.get(k.instance);
  const current = inst !== undefined && inst.deployment === k.deployment ? inst : undefined;
  return {
    instance: k.instance,
    deployment: k.deployment,
    model: current?.model ?? null,
    state: current?.state ?? 'removed',
    packEndsAt: current?.packEndsAt ?? null,
  };
}

/** A key's row in its pack. */
export function keyRow(k: KeyRecord): KeyUsageRow {
  return { id: k.id, name: k.name, status: k.status, ...counts(k.usage, k.lastUsedAt) };
}

/** One key's line of the whole report. */
export function usageLine(instances: ReadonlyMap<string, Instance>, k: KeyRecord): UsageLine {
  return { ...packOf(instances, k), ...keyRow(k) };
}

/** Whether the filter's `since` keeps the key (its last use at or after it). */
export function usedSince(k: KeyRecord, since: string | null | undefined): boolean {
  return since === null || since === undefined || (k.lastUsedAt !== null && k.lastUsedAt >= since);
}

/** Whether a key is in the report the filter asks for. */
export function chosenBy(filter: UsageFilter): (k: KeyRecord) => boolean {
  const since = filter.since ?? null;
  return (k) =>
    (filter.instance === undefined || k.instance === filter.instance) &&
    (filter.key === undefined || k.id === filter.key) &&
    usedSince(k, since);
}

/** The report's key order: by creation time, then by id as a person reads it. */
export function byCreation(a: KeyRecord, b: KeyRecord): number {
  return a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);
}

/** The instance's current pack first, then older ones: by instance id, then (a stable sort) by first key. */
export function packOrder(a: PackHead, b: PackHead): number {
  return a.instance.localeCompare(b.instance) || Number(a.state === 'removed') - Number(b.state === 'removed');
}

/** A pack's total before its first key. */
export function emptyTotal(): UsageCounts {
  return counts(emptyUsage(), null);
}

/** `total` with a key's counters added: a pack's total is this over its keys, in report order. */
export function addToTotal(total: UsageCounts, k: KeyRecord): UsageCounts {
  return counts(addUsage(total, k.usage), later(total.lastUsedAt, k.lastUsedAt));
}

/** The pack a key belongs to in `packs` (by instance and deployment), found or added. */
export function packFor<P>(packs: Map<string, P>, k: KeyRecord, make: () => P): P {
  const id = `${k.instance}\u0000${k.deployment}`;
  let pack = packs.get(id);
  if (pack === undefined) packs.set(id, (pack = make()));
  return pack;
}

/** Adds a key (in report order) to its pack in `packs`, which then holds packs in the order of their first key. */
export function addToPacks(
  packs: Map<string, PackUsage>,
  instances: ReadonlyMap<string, Instance>,
  k: KeyRecord,
): void {
  const pack = packFor(packs, k, () => ({ ...packOf(instances, k), keys: [], total: emptyTotal() }));
  pack.keys.push(keyRow(k));
  pack.total = addToTotal(pack.total, k);
}

/**
 * `ob-proxy usage`: per key and per pack, from the counters in memory (which include what is
 * not flushed yet). Counters are whole-life totals of each key: `since` selects keys, it does
 * not cut their counters at that time.
 */
export function usageReport(
  instances: ReadonlyMap<string, Instance>,
  keys: Iterable<KeyRecord>,
  filter: UsageFilter,
): UsageReport {
  const packs = new Map<string, PackUsage>();
  for (const k of [...keys].filter(chosenBy(filter)).sort(byCreation)) addToPacks(packs, instances, k);
  return { since: filter.since ?? null, packs: [...packs.values()].sort(packOrder) };
}
