import type { KeyRecord } from '../domain/key.js';
import {
  type BucketCounts,
  type BucketSize,
  type UsageBucket,
  addCounts,
  bucketKey,
  byStartAndKey,
  dayStart,
} from '../domain/usage-buckets.js';

/** One key's usage in one hour or day, with what names the key. */
export interface BucketRow extends BucketCounts {
  start: string;
  /** `day` in an hourly report: an hour older than a week, kept only as its day. */
  size: BucketSize;
  keyId: string;
  name: string;
  instance: string;
}

/** `ob-proxy usage --by hour|day`: rows oldest first, then by key, and their sum. */
export interface UsageBucketsReport {
  by: BucketSize;
  since: string | null;
  until: string | null;
  rows: BucketRow[];
  total: BucketCounts;
}

const ZERO: BucketCounts = { requests: 0, promptTokens: 0, completionTokens: 0, errors: 0 };

/**
 * The buckets as rows: by the day, hours are summed into their day (UTC); by the hour, they stay
 * as they are (with the days an hour has been rolled into). Buckets of one key and start, from
 * the store and from what is not written yet, are summed into one row.
 */
export function bucketsReport(
  buckets: readonly UsageBucket[],
  keys: ReadonlyMap<string, KeyRecord>,
  q: { by: BucketSize; since: string | null; until: string | null },
): UsageBucketsReport {
  const merged = new Map<string, UsageBucket>();
  for (const b of buckets) {
    const at =
      q.by === 'day' && b.size === 'hour' ? { ...b, size: 'day' as const, start: dayStart(Date.parse(b.start)) } : b;
    const k = bucketKey(at);
    const was = merged.get(k);
    merged.set(k, was === undefined ? { ...at } : addCounts(was, at));
  }
  const rows = [...merged.values()].sort(byStartAndKey).map((b) => {
    const key = keys.get(b.keyId);
    return {
      start: b.start,
      size: b.size,
      keyId: b.keyId,
      name: key?.name ?? '',
      instance: key?.instance ?? '',
      requests: b.requests,
      promptTokens: b.promptTokens,
      completionTokens: b.completionTokens,
      errors: b.errors,
    };
  });
  const { requests, promptTokens, completionTokens, errors } = rows.reduce<BucketCounts>(addCounts, ZERO);
  return {
    by: q.by,
    since: q.since,
    until: q.until,
    rows,
    total: { requests, promptTokens, completionTokens, errors },
  };
}
