import type { Instance } from '../domain/instance.js';
import { type AuditEvent, type KeyLimits, type KeyRecord, type KeyUsage, addUsage } from '../domain/key.js';
import type { DaemonReports } from '../services/revocation-confirmation.js';
import { type UsageBucket, addCounts, bucketKey, bucketsIn, countsAnything } from '../domain/usage-buckets.js';

export const STORE_VERSION = 2;

export interface StoreData {
  version: number;
  instances: Instance[];
  keys: KeyRecord[];
  events: AuditEvent[];
  /**
   * The model ids an instance may be added with, as `ob-proxy models` last set them. Absent or
   * null: never set, and each daemon allows its OB_PROXY_MODELS (or the default ids).
   */
  models?: string[] | null;
  /** Usage by the hour (and by the day, once rolled up): absent or empty when none was counted. */
  usageBuckets?: UsageBucket[];
}

/** Usage gathered since the last flush: added to the stored counters, never written over them. */
export interface UsageDelta extends KeyUsage {
  keyId: string;
  lastUsedAt: string | null;
  /** The hour it was counted in (its first moment, ISO 8601 UTC); absent: counted in no bucket. */
  hour?: string;
}

/** `usage --by`: the buckets of some keys (all when null) that overlap [since, until). */
export interface BucketQuery {
  since: string | null;
  until: string | null;
  keyIds: ReadonlySet<string> | null;
}

/** `audit`: the newest `limit` events (of one instance when given), oldest first. */
export interface AuditQuery {
  instance?: string | undefined;
  limit: number;
}

export type Mutation =
  /**
   * `prev` is the record the change was decided from (absent for an addition). A store shared by
   * several daemons compares it with what it holds, so a change decided on a stale view is refused
   * (or, for a halt, reduced to its revocations) instead of undoing another daemon's change.
   * `packEnd`: the halt ends the pack that ended at `instance.packEndsAt`; a shared store refuses
   * it (invalid_transition) if the pack was extended through another daemon meanwhile.
   */
  | { op: 'putInstance'; instance: Instance; prev?: Instance; packEnd?: true }
  /** `deployment`: the one removed; a shared store leaves a newer deployment of the id alone. */
  | { op: 'deleteInstance'; id: string; deployment?: string }
  /** A key's usage counters are left as stored: only addUsage changes them. */
  | { op: 'putKey'; key: KeyRecord }
  /** A key's limits replaced (keys limit); an active key's other fields stay as stored. */
  | { op: 'setKeyLimits'; keyId: string; limits: KeyLimits }
  /** An active key to be revoked at `at` (reason rotated); a revoked key is left as it is. */
  | { op: 'scheduleRevocation'; keyId: string; at: string }
  | { op: 'appendEvent'; event: AuditEvent }
  /**
   * The allowed model list replaced. `prev`: the stored list it was decided from (null: never
   * set); `disallowed`: the ids the change took away. A shared store refuses the change if another
   * daemon changed the list meanwhile, or if an instance that is not terminated runs one of those.
   */
  | { op: 'setModels'; models: string[]; prev: string[] | null; disallowed: string[] }
  | ({ op: 'addUsage' } & UsageDelta);

/** A change committed to a shared store, in commit order (`no` has no gaps). */
export interface StoreChange {
  no: number;
  mutations: Mutation[];
}

/** What a shared store tells the daemon that holds it (see Store.subscribe). */
export interface StoreFeed {
  /** Changes committed by other daemons, or by the store itself on this daemon's behalf, in order. */
  changes(changes: StoreChange[]): Promise<void>;
  /** The whole state again, after a gap in the changes this daemon heard. */
  reload(data: StoreData): Promise<void>;
}

/**
 * One daemon's per-key limit counts at one tick of the clock, for the others (Store.shareLimits):
 * the window they are for (its number, now / window length), and per key the requests and tokens
 * counted in it, the requests in flight, the requests asked since the last tick (admitted or not),
 * and how many more requests, tokens and requests in flight it promised to stay within until the
 * others have read this.
 */
export interface LimitCounts {
  window: number;
  keys: Record<
    string,
    [
      requests: number,
      tokens: number,
      inflight: number,
      asked: number,
      moreRequests: number,
      moreTokens: number,
      moreInflight: number,
    ]
  >;
}

/** Every daemon's counts published for one tick, by daemon (this one's under `self`). */
export interface LimitSnapshot {
  tick: number;
  self: string;
  nodes: Map<string, LimitCounts>;
}

/** What a daemon gives a shared store to exchange its limit counts with the others. */
export interface LimitExchange {
  /** Ticks fall on multiples of this (ms since the epoch), on every daemon alike. */
  periodMs: number;
  /** This daemon's counts now. */
  capture(now: number): LimitCounts;
  /** The counts every daemon published for an earlier tick. */
  received(snapshot: LimitSnapshot): void;
  /**
   * Whether there is anything to exchange: false while no key anywhere has a limit and this
   * daemon counts none, and the tick is then skipped (no write, no read). Absent: always.
   */
  needed?(): boolean;
}

/**
 * The daemon's only way to persistence. Narrow on purpose: a PostgreSQL store implements the
 * same three calls. `commit` resolves only once every mutation is durable, and persists all of
 * them or none.
 */
export interface Store {
  load(): Promise<StoreData>;
  commit(mutations: readonly Mutation[]): Promise<void>;
  close(): Promise<void>;
  /** Where the data lives, for logs and `status` (never credentials). */
  readonly location: string;
  /**
   * Whether a key's revocation is durable even though a commit carrying it failed (a store with
   * a revocation journal). Absent: only a successful commit makes it durable.
   */
  isRevocationDurable?(keyId: string): boolean;
  /**
   * A store shared by several daemons: whether a key's revocation reached every daemon (each
   * refuses the key) even though the commit carrying it failed; the rest of that commit waits.
   */
  isRevocationShared?(keyId: string): boolean;
  /**
   * A store shared by several daemons: starts delivering the changes committed since `load`,
   * through other daemons or by the store itself (a key revoked with its instance although this
   * daemon did not know it yet). Absent: this daemon is the only writer.
   */
  subscribe?(feed: StoreFeed): void;
  /**
   * The audit trail the store keeps, read when asked: a daemon holds only the newest events in
   * memory. Absent: the daemon's own (a store that keeps none).
   */
  auditEvents?(q: AuditQuery): Promise<readonly Readonly<AuditEvent>[]>;
  /** Usage by the hour and day (docs/cli.md, usage --by). Absent: the store keeps none. */
  usageBuckets?(q: BucketQuery): Promise<UsageBucket[]>;
  /** A shared store: delivers what other daemons committed so far, before resolving. */
  sync?(): Promise<void>;
  /**
   * When this daemon last knew itself in sync with a shared store (ms since the epoch): the
   * request path refuses keys once that is longer ago than --max-stale. Absent: always in sync.
   */
  lastInSync?(): number;
  /** A shared store: why this daemon is not in sync (it cannot read, or cannot write), as the database said; null if it can. */
  syncProblem?(): string | null;
  /**
   * Whether this daemon does the cluster's chores (ending packs on their clock): one daemon of
   * a shared store at a time. Absent: always.
   */
  holdsChores?(): boolean;
  /**
   * A shared store: at every tick, publishes this daemon's limit counts (one write) and hands back
   * those every daemon published for the tick before, so per-key limits hold cluster-wide.
   */
  shareLimits?(exchange: LimitExchange): void;
  /**
   * A shared store: every daemon's last report (what it has applied, when it said so), and
   * which of them have applied the revocations of `keyIds`. Absent: this daemon is the only one.
   */
  daemonReports?(keyIds: readonly string[]): Promise<DaemonReports>;
}

export function emptyData(): StoreData {
  return { version: STORE_VERSION, instances: [], keys: [], events: [] };
}

/**
 * In-memory tables that mutations apply to; serialised whole by file-backed stores. A record is
 * replaced, never changed in place, so a reference taken for a snapshot stays as it was.
 */
export class Tables {
  readonly instances = new Map<string, Instance>();
  readonly keys = new Map<string, KeyRecord>();
  events: AuditEvent[] = [];
  models: string[] | null = null;
  /** Usage buckets by bucketKey; a bucket is replaced, never changed in place. */
  readonly buckets = new Map<string, UsageBucket>();

  static from(data: StoreData): Tables {
    const t = new Tables();
    for (const i of data.instances) t.instances.set(i.id, i);
    for (const k of data.keys) t.keys.set(k.id, k);
    t.events = [...data.events];
    t.models = data.models == null ? null : [...data.models];
    for (const b of data.usageBuckets ?? []) t.buckets.set(bucketKey(b), b);
    return t;
  }

  apply(m: Mutation): void {
    switch (m.op) {
      case 'putInstance':
        this.instances.set(m.instance.id, structuredClone(m.instance));
        break;
      case 'deleteInstance':
        this.instances.delete(m.id);
        break;
      case 'putKey': {
        const stored = this.keys.get(m.key.id);
        const key = structuredClone(m.key);
        // The caller's copy may count requests not flushed yet; they arrive by addUsage.
        if (stored !== undefined) {
          key.usage = stored.usage;
          key.lastUsedAt = stored.lastUsedAt;
        }
        this.keys.set(m.key.id, key);
        break;
      }
      case 'setKeyLimits': {
        const key = this.keys.get(m.keyId);
        if (key !== undefined) key.limits = { ...m.limits };
        break;
      }
      case 'scheduleRevocation': {
        const key = this.keys.get(m.keyId);
        if (key?.status === 'active') this.keys.set(m.keyId, { ...key, revokeAt: m.at });
        break;
      }
      case 'appendEvent':
        this.events.push(structuredClone(m.event));
        break;
      case 'setModels':
        this.models = [...m.models];
        break;
      case 'addUsage': {
        const stored = this.keys.get(m.keyId);
        if (stored === undefined) break;
        // A new record, never a change in place: a snapshot being written holds the old one.
        const key = { ...stored };
        this.keys.set(m.keyId, key);
        key.usage = addUsage(key.usage, m);
        if (m.lastUsedAt !== null && (key.lastUsedAt === null || m.lastUsedAt > key.lastUsedAt))
          key.lastUsedAt = m.lastUsedAt;
        if (m.hour !== undefined && countsAnything(m)) {
          const at = { keyId: m.keyId, size: 'hour' as const, start: m.hour };
          const was = this.buckets.get(bucketKey(at)) ?? {
            ...at,
            requests: 0,
            promptTokens: 0,
            completionTokens: 0,
            errors: 0,
          };
          this.buckets.set(bucketKey(at), addCounts(was, m));
        }
        break;
      }
    }
  }

  /**
   * The newest events, oldest first: the store's own records, not copies (no event is changed
   * once appended, and a caller gets them read-only). A copy of 10,000 events held the event
   * loop for tens of milliseconds in one piece.
   */
  auditEvents(q: AuditQuery): readonly Readonly<AuditEvent>[] {
    const out: AuditEvent[] = [];
    for (let i = this.events.length - 1; i >= 0 && out.length < q.limit; i--) {
      const e = this.events[i]!;
      if (q.instance === undefined || e.instance === q.instance) out.push(e);
    }
    return out.reverse();
  }

  bucketsIn(q: BucketQuery): UsageBucket[] {
    return bucketsIn(this.buckets.values(), q);
  }

  toData(): StoreData {
    return {
      version: STORE_VERSION,
      instances: [...this.instances.values()],
      keys: [...this.keys.values()],
      events: this.events,
      // Absent while never set, as in a store written before the list was kept.
      ...(this.models === null ? {} : { models: this.models }),
      ...(this.buckets.size === 0 ? {} : { usageBuckets: [...this.buckets.values()] }),
    };
  }
}
