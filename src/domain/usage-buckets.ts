/**
 * Usage by the hour, for bills: per key and hour, the requests, input (prompt) and output
 * (completion) tokens and errors counted in it. Kept in both stores; an hour older than
 * HOURS_KEPT_MS is rolled up into its day, so a key holds at most a week of hours and then a
 * row a day.
 */

export type BucketSize = 'hour' | 'day';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
/** Hours are kept this long, then rolled up into their day (UTC). */
export const HOURS_KEPT_MS = 7 * DAY_MS;

export interface UsageBucket {
  keyId: string;
  size: BucketSize;
  /** The bucket's first moment, ISO 8601 UTC (a whole hour, or midnight UTC for a day). */
  start: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  errors: number;
}

/** What a bucket counts, as a usage delta holds it. */
export type BucketCounts = Pick<UsageBucket, 'requests' | 'promptTokens' | 'completionTokens' | 'errors'>;

export function hourStart(ms: number): string {
  return new Date(Math.floor(ms / HOUR_MS) * HOUR_MS).toISOString();
}

export function dayStart(ms: number): string {
  return new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString();
}

export function bucketKey(b: Pick<UsageBucket, 'keyId' | 'size' | 'start'>): string {
  return `${b.keyId} ${b.size} ${b.start}`;
}

/** `into` with `c` added (a new object: a snapshot being written may hold the old one). */
export function addCounts<T extends BucketCounts>(into: T, c: BucketCounts): T {
  return {
    ...into,
    requests: into.requests + c.requests,
    promptTokens: into.promptTokens + c.promptTokens,
    completionTokens: into.completionTokens + c.completionTokens,
    errors: into.errors + c.errors,
  };
}

/** Whether a delta counted anything a bucket keeps (a flush may carry only a later last use). */
export function countsAnything(c: BucketCounts): boolean {
  return c.requests !== 0 || c.promptTokens !== 0 || c.completionTokens !== 0 || c.errors !== 0;
}

/**
 * Rolls the hours that started HOURS_KEPT_MS or more before `nowMs` into their days, in place
 * of a map keyed by bucketKey. Returns whether anything changed.
 */
export function rollUpHours(buckets: Map<string, UsageBucket>, nowMs: number): boolean {
  const before = nowMs - HOURS_KEPT_MS;
  let changed = false;
  for (const [k, b] of buckets) {
    if (b.size !== 'hour' || Date.parse(b.start) >= before) continue;
    buckets.delete(k);
    const day = { keyId: b.keyId, size: 'day' as const, start: dayStart(Date.parse(b.start)) };
    const dk = bucketKey(day);
    const was = buckets.get(dk) ?? { ...day, requests: 0, promptTokens: 0, completionTokens: 0, errors: 0 };
    buckets.set(dk, addCounts(was, b));
    changed = true;
  }
  return changed;
}

/** The buckets of `keyIds` (all when null) that start in [since, until), oldest first. */
export function bucketsIn(
  buckets: Iterable<UsageBucket>,
  q: { since: string | null; until: string | null; keyIds: ReadonlySet<string> | null },
): UsageBucket[] {
  const out: UsageBucket[] = [];
  for (const b of buckets) {
    if (q.keyIds !== null && !q.keyIds.has(b.keyId)) continue;
    // A day overlapping the range counts whole: its hours are no longer known.
    const end = Date.parse(b.start) + (b.size === 'day' ? DAY_MS : HOUR_MS);
    if (q.since !== null && end <= Date.parse(q.since)) continue;
    if (q.until !== null && Date.parse(b.start) >= Date.parse(q.until)) continue;
    out.push({ ...b });
  }
  return out.sort(byStartAndKey);
}

/** Oldest first, then by key id, byte by byte: the same order whichever store answered. */
export function byStartAndKey(
  a: Pick<UsageBucket, 'start' | 'keyId'>,
  b: Pick<UsageBucket, 'start' | 'keyId'>,
): number {
  if (a.start !== b.start) return a.start < b.start ? -1 : 1;
  return a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0;
}
