import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Instance } from '../domain/instance.js';
import type { AuditEvent, KeyRecord } from '../domain/key.js';
import { CHANNEL, ChangeFeed } from './postgres/change-feed.js';
import { Chores } from './postgres/chores.js';
import { DaemonHeartbeat } from './postgres/daemon-heartbeat.js';
import { readDaemonReports } from './postgres/daemon-row.js';
import { commitChange } from './postgres/commit-change.js';
import type { TableCounts } from './postgres/import.js';
import { LimitExchanger } from './postgres/limit-exchange.js';
import { migrate } from './postgres/migrations.js';
import { Notices, errText } from './postgres/notices.js';
import { openPools } from './postgres/pools.js';
import { redactUrl } from './postgres/redact-url.js';
import { type PgTarget, pgTarget, setupProblem } from './postgres/setup-problems.js';
import { loadUsageByRoute } from './postgres/usage.js';
import { readBuckets } from './postgres/usage-buckets.js';
import type { UsageBucket } from '../domain/usage-buckets.js';
import type { UsageByRoute } from '../domain/route-usage.js';
import { replaceAll } from './postgres/replace-all.js';
import { RevocationLedger } from './postgres/revocation-ledger.js';
import { RevocationWriteBack } from './postgres/revocation-write-back.js';
import { unwrittenLabel } from './postgres/unwritten-label.js';
import { cursorParams, revocationsSince } from './postgres/revocations.js';
import { SessionConnection } from './postgres/session.js';
import { SyncState } from './postgres/sync-state.js';
import {
  type AuditQuery,
  type BucketQuery,
  type LimitExchange,
  STORE_VERSION,
  type Mutation,
  type Store,
  type StoreData,
  type StoreFeed,
} from './store.js';
import { validateStoreData } from './store-validation.js';
import type { DaemonReports } from '../services/revocation-confirmation.js';

export interface PostgresStoreOptions {
  /** How often the change log is read whether or not a notification came (ms; default 2000). */
  catchupMs?: number;
  /** LISTEN for change notifications (default true). Off: the catch-up read alone (a test switch). */
  notify?: boolean;
  /** Things worth an operator's attention (lost connection, reloads), for the log. */
  onNotice?: (message: string) => void;
  /** The clock, in ms (tests). */
  now?: () => number;
  /**
   * This daemon's journal of revocations the database did not take (in its home): each is
   * applied at the next start, before serving, and written to the database once it takes writes.
   * Absent (`store migrate`): a revocation the database refuses lives in memory only.
   */
  journalPath?: string;
  /** This daemon's process id, for its row in ob_daemons. */
  pid?: number;
  /** This daemon's --max-stale (ms), in its row: silent longer than this, it refuses every key. */
  maxStaleMs?: number;
  /** Keys read per statement at load (default KEY_PAGE). */
  keyPage?: number;
  /** Audit events a query reads at most (default AUDIT_PAGE; a test sets a small one). */
  auditPage?: number;
}

/**
 * The PostgreSQL store: several daemons share one database. Each keeps the whole registry in
 * memory (the request path never waits on the database) and hears every change made through the
 * others (postgres/change-feed.ts). This class is the Store: the whole state read in one
 * snapshot, and every write taken through the change counter; the rest it composes, each part
 * in a file of its own under postgres/:
 * - pools.ts: the connections, and the time-outs that keep a stuck peer from holding the others;
 * - session.ts: the connection that LISTENs and holds the chores lock; chores.ts: what the
 *   holder of that lock does once a minute;
 * - change-feed.ts: the changes and revocations other daemons commit, read in order;
 * - revocation-ledger.ts, revocation-write-back.ts: revoked wins, whatever the database refused
 *   or lost, through a journal in the daemon's home;
 * - daemon-heartbeat.ts, sync-state.ts: this daemon's row, and whether it is in sync;
 * - limit-exchange.ts: the per-key limit counts every daemon shares.
 *
 * Built on node-postgres (`pg`): the most used PostgreSQL driver for Node, maintained since 2010,
 * with LISTEN/NOTIFY on a plain Client and no native parts to build (docs/scale-out.md).
 */
export class PostgresStore implements Store {
  readonly location: string;
  /** This process's name in the change log, so it skips its own changes. */
  readonly origin = randomUUID();
  private readonly pool: pg.Pool;
  private readonly writers: pg.Pool;
  private readonly catchupMs: number;
  private readonly now: () => number;
  private readonly syncState: SyncState;
  private readonly ledger: RevocationLedger;
  private readonly writeBack: RevocationWriteBack;
  private readonly changes: ChangeFeed;
  private readonly heartbeat: DaemonHeartbeat;
  private readonly session: SessionConnection;
  private readonly chores: Chores;
  private readonly limits: LimitExchanger;
  private timer: NodeJS.Timeout | undefined;
  /** The first period's work (session, first read): a sync waits for it. */
  private following: Promise<void> | null = null;
  private closed = false;
  private migrated = false;
  /** The newest audit event as of the last load (null before the first): a reload reads those after it. */
  private eventsSeen: number | null = null;
  private readonly keyPage: number;
  private readonly auditPage: number;
  /** Where the URL points, for the commands a missing database or role is answered with. */
  private readonly target: PgTarget;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    const location = (this.location = redactUrl(url));
    this.target = pgTarget(url);
    const origin = this.origin;
    const now = (this.now = options.now ?? Date.now);
    this.catchupMs = options.catchupMs ?? 500;
    this.keyPage = options.keyPage ?? KEY_PAGE;
    this.auditPage = options.auditPage ?? AUDIT_PAGE;
    this.syncState = new SyncState(now);
    const notices = new Notices(options.onNotice);
    const { pool, writers } = openPools(url, (err) => notices.say(`PostgreSQL connection lost (${errText(err)}).`));
    this.pool = pool;
    this.writers = writers;
    const sync = this.syncState;
    const ledger = (this.ledger = new RevocationLedger(now));
    // What every part is told; each takes what it needs.
    const base = { pool, origin, location, now, notices };
    // The parts that call each other back (a reload writes back what the database lost; the
    // write-back's events go out through the feed) do so through the store's own fields.
    this.writeBack = new RevocationWriteBack({
      ...base,
      ledger,
      channel: CHANNEL,
      journalPath: options.journalPath,
      commit: (decide) => this.commitDecided(decide),
      deliver: (mutations) => this.changes.deliver(mutations),
      heldChanged: () => void this.session.relabel(),
    });
    this.changes = new ChangeFeed({
      ...base,
      ledger,
      sync,
      applied: () => this.heartbeat.reportApplied(),
      reloader: { load: () => this.load(), writeBackLost: (data) => this.writeBack.writeBackLost(data) },
    });
    const startedAt = new Date(now()).toISOString();
    this.heartbeat = new DaemonHeartbeat({
      ...base,
      sync,
      identity: { origin, pid: options.pid, startedAt, maxStaleMs: options.maxStaleMs },
      position: this.changes,
    });
    this.session = new SessionConnection({
      url,
      location,
      channel: (options.notify ?? true) ? CHANNEL : null,
      notices,
      onNotification: (msg) => this.changes.notified(msg),
      label: () => unwrittenLabel(origin, ledger.unsharedSummary()),
    });
    this.chores = new Chores(pool, now, ledger);
    this.limits = new LimitExchanger({ pool, origin, location, now, onNotice: options.onNotice });
  }

  async load(): Promise<StoreData> {
    await this.writeBack.openJournal();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw new Error(
        setupProblem(this.location, this.target, err) ??
          `The store ${this.location} cannot be reached (${errText(err)}). Check that PostgreSQL is running and the URL is right.`,
        { cause: err },
      );
    }
    try {
      await this.migrateOnce(client);
      // One snapshot: the data and the change number it includes, so following starts exactly there.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const head = await client.query<{ change_no: string; at: string | null }>(
        'SELECT change_no, (SELECT at::text FROM ob_changes WHERE no = change_no) AS at FROM ob_meta WHERE id = 1',
      );
      const instances = await client.query<{ record: Instance }>('SELECT record FROM ob_instances ORDER BY id');
      const byRoute = await loadUsageByRoute(client);
      const keys = await readKeyPages(client, this.keyPage, byRoute);
      // The audit trail is read when asked (auditEvents), not held: it grows with history. A
      // reload after a gap reads the events committed since the last load, for the listeners.
      const events = await client.query<{ record: AuditEvent }>(
        'SELECT record FROM ob_events WHERE seq > $1 ORDER BY seq LIMIT $2',
        [this.eventsSeen ?? Number.MAX_SAFE_INTEGER, MAX_RELOAD_EVENTS],
      );
      const lastSeq = await client.query<{ seq: string | null }>('SELECT max(seq)::text AS seq FROM ob_events');
      const models = await client.query<{ value: string[] }>("SELECT value FROM ob_settings WHERE name = 'models'");
      // The same snapshot: the revocations ob_keys does not show yet (those it shows are old
      // news, and every one ever made is a row), and where the next read of them starts.
      const revs = await client.query<{ rev_xmax: string; rev_xip: string[]; revocations: KeyRecord[] }>(
        `SELECT ${revocationsSince(1, true)}`,
        cursorParams(null),
      );
      await client.query('COMMIT');
      this.changes.startAt({
        change: Number(head.rows[0]!.change_no),
        changeAt: head.rows[0]!.at,
        revocations: { xmax: revs.rows[0]!.rev_xmax, xip: revs.rows[0]!.rev_xip },
      });
      this.syncState.loaded(this.now());
      this.eventsSeen = Math.max(this.eventsSeen ?? 0, Number(lastSeq.rows[0]!.seq ?? 0));
      const data: StoreData = {
        version: STORE_VERSION,
        instances: instances.rows.map((r) => r.record),
        keys,
        events: events.rows.map((r) => r.record),
        ...(models.rows[0] === undefined ? {} : { models: models.rows[0].value }),
      };
      // The tables' primary key and unique hash column: no key repeats.
      const valid = validateStoreData(this.location, data, { uniqueKeys: true });
      this.ledger.revokedWins(valid, revs.rows[0]!.revocations, this.writeBack.journalRecords());
      for (const key of valid.keys) if (key.status === 'revoked') this.ledger.remember(key);
      return valid;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      const problem = setupProblem(this.location, this.target, err);
      throw problem === null ? err : new Error(problem, { cause: err });
    } finally {
      client.release();
    }
  }

  async commit(mutations: readonly Mutation[]): Promise<void> {
    if (mutations.length === 0) return;
    // The revocations first, on their own (nothing this daemon's or another's bookkeeping holds
    // delays them), then the change as a whole. Not a pack end's: it is written only if no daemon
    // extended the pack meanwhile, so its revocations take effect with it or not at all; every
    // daemon refuses those keys from packEndsAt in its own memory, so they need no head start.
    const packEnd = mutations.some((m) => m.op === 'putInstance' && m.packEnd === true);
    const revoked = packEnd
      ? []
      : mutations.flatMap((m) =>
          m.op === 'putKey' && m.key.status === 'revoked' && !this.ledger.isShared(m.key.id) ? [m.key] : [],
        );
    if (revoked.length > 0) await this.writeBack.share(revoked);
    await this.commitDecided(() => Promise.resolve(mutations));
  }

  isRevocationDurable(keyId: string): boolean {
    return this.writeBack.isDurable(keyId);
  }

  isRevocationShared(keyId: string): boolean {
    return this.ledger.isShared(keyId);
  }

  /**
   * One write (postgres/commit-change.ts). Returns the batch written; its revocations are known
   * here from then on, and what the store did on this daemon's behalf arrives by the feed.
   */
  private async commitDecided(
    decide: (client: pg.PoolClient) => Promise<readonly Mutation[]>,
  ): Promise<readonly Mutation[]> {
    const { mutations, extra } = await commitChange(
      { writers: this.writers, origin: this.origin, location: this.location, channel: CHANNEL, now: this.now },
      decide,
    );
    for (const m of mutations) if (m.op === 'putKey' && m.key.status === 'revoked') this.ledger.remember(m.key);
    if (extra.length > 0) this.changes.wake();
    return mutations;
  }

  /** `ob-proxy store migrate`: a whole store written into this database (postgres/replace-all.ts). */
  async replaceAll(data: StoreData, force: boolean): Promise<TableCounts> {
    let client: pg.PoolClient;
    try {
      client = await this.writers.connect();
    } catch (err) {
      const problem = setupProblem(this.location, this.target, err);
      throw problem === null ? err : new Error(problem, { cause: err });
    }
    try {
      return await replaceAll(client, this.location, data, force, () => this.migrateOnce(client));
    } catch (err) {
      const problem = setupProblem(this.location, this.target, err);
      throw problem === null ? err : new Error(problem, { cause: err });
    } finally {
      client.release();
    }
  }

  /** Brings the schema up to date, once per store. */
  private async migrateOnce(client: pg.PoolClient): Promise<void> {
    if (!this.migrated) {
      await migrate(client, this.location);
      this.migrated = true;
    }
  }

  /** The older of the last read of the change log and the last write of this daemon's row that succeeded. */
  lastInSync(): number {
    return this.syncState.lastInSync();
  }

  /** Why this daemon is not in sync, as the database said (null: it reads and writes). */
  syncProblem(): string | null {
    return this.syncState.problem();
  }

  holdsChores(): boolean {
    return this.session.holdsChores();
  }

  subscribe(feed: StoreFeed): void {
    this.changes.follow(feed);
    this.following = this.tick(true);
  }

  async sync(): Promise<void> {
    await this.following;
    this.changes.wake();
    await this.changes.reading;
  }

  shareLimits(exchange: LimitExchange): void {
    this.limits.start(exchange);
  }

  /**
   * Read newest first, a page of rows (AUDIT_PAGE) a query: the rows of one answer arrive
   * together and are parsed in one go (10,000 events held the daemon's event loop for 50 ms), and
   * between two queries the loop is free.
   */
  async auditEvents(q: AuditQuery): Promise<readonly Readonly<AuditEvent>[]> {
    const out: AuditEvent[] = [];
    let before: string | null = null;
    while (out.length < q.limit) {
      const want = Math.min(this.auditPage, q.limit - out.length);
      const { rows }: { rows: { cursor: string; record: AuditEvent }[] } = await this.pool.query(
        `SELECT seq::text AS cursor, record FROM ob_events
          WHERE ($1::text IS NULL OR record->>'instance' = $1) AND ($2::bigint IS NULL OR seq < $2::bigint)
          ORDER BY seq DESC LIMIT $3`,
        [q.instance ?? null, before, want],
      );
      for (const r of rows) out.push(r.record);
      if (rows.length < want) break;
      before = rows[rows.length - 1]!.cursor;
    }
    return out.reverse();
  }

  usageBuckets(q: BucketQuery): Promise<UsageBucket[]> {
    return readBuckets(this.pool, q);
  }

  /** Every daemon's report, and which of them have applied the revocations of `keyIds` (this one's from memory). */
  daemonReports(keyIds: readonly string[]): Promise<DaemonReports> {
    return readDaemonReports(this.pool, keyIds, {
      origin: this.origin,
      change: this.changes.lastChange,
      cursor: this.changes.revocationCursor,
      unwritten: this.ledger.unsharedSummary(),
    });
  }

  /**
   * Every period: read the change log, keep the session connection (LISTEN and the chores lock)
   * up, write this daemon's row and what the database lacks, and, holding the chores lock, do
   * the chores (once a minute).
   */
  private async tick(first = false): Promise<void> {
    if (this.closed) return;
    try {
      // The catch-up read bounds a lost notification, so it never waits on the session: one
      // gone silent answers only at its time-out. The first period sets LISTEN up before a sync.
      const checked = this.session.check();
      if (first) await checked;
      this.changes.wake();
      // Beside the read, never awaited by the period: a write that hangs delays neither.
      this.heartbeat.beat();
      await this.changes.reading;
      this.writeBack.settle();
      if (this.session.holdsChores() && !this.closed) await this.chores.runIfDue(this.changes.lastChange);
    } finally {
      if (!this.closed) {
        this.timer = setTimeout(() => void this.tick(), this.catchupMs);
        this.timer.unref();
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    for (const part of [this.limits, this.changes, this.heartbeat, this.writeBack]) part.stop();
    await this.limits.idle();
    await this.changes.reading?.catch(() => {});
    await this.session.idle();
    await this.heartbeat.idle();
    await this.writeBack.close();
    this.session.end();
    await this.pool.end().catch(() => {});
    await this.writers.end().catch(() => {});
  }
}

/** Keys read a page at a time (a cursor in the load's snapshot), each page well within the time-outs. */
const KEY_PAGE = 20_000;

/** Audit events a query reads at most: about 130 KB, parsed in a few milliseconds. */
const AUDIT_PAGE = 1_000;

/** Events a reload hands the listeners at most (a daemon cut off for long reads the rest when asked). */
const MAX_RELOAD_EVENTS = 10_000;

/**
 * A key row's columns, in the order readKeyPages selects them, as its parsers give them: the
 * record parsed, the counters as numbers, the times as text.
 */
type KeyRow = [
  record: KeyRecord,
  requests: number,
  promptTokens: number,
  completionTokens: number,
  lastUsedAt: string | null,
  reasoningTokens: number,
  errors: number,
  disconnects: number,
  firstUsedAt: string | null,
  estimatedTokens: number,
];

const JSONB_OID = 3802;
const INT8_OID = 20;
const asText = (v: string): string => v;

/**
 * The key rows' parsers: each value parsed as its row arrives, so its text is garbage before
 * the next page rather than after it (a page's text outlives the young generation). A counter
 * is a plain Number (pg's own int8 parser tests each against a pattern to keep it a string).
 */
const keyRowTypes = {
  getTypeParser: (oid: number) => (oid === JSONB_OID ? JSON.parse : oid === INT8_OID ? Number : asText),
};

/**
 * Every key, through a cursor of the transaction's snapshot: one statement took 8 of the pool's
 * 9 s statement time-out at 1,000,000 keys, so a start failed as the store grew. Each FETCH is a
 * statement of its own, bounded by the page. The rows come as the table holds them and are put
 * in order (creation, id) here: ordered by the database, the first FETCH sorted them all, and
 * outran the time-out at 500,000 keys on a loaded machine. Rows come as arrays (no object per
 * row) and each row's record is made the key in place (its counters from their columns): a copy
 * of it was garbage of a million objects.
 */
async function readKeyPages(
  client: pg.PoolClient,
  size: number,
  byRoute: ReadonlyMap<string, UsageByRoute>,
): Promise<KeyRecord[]> {
  await client.query(
    `DECLARE ob_load_keys NO SCROLL CURSOR FOR SELECT record, requests, prompt_tokens, completion_tokens,
       last_used_at, reasoning_tokens, errors, disconnects, first_used_at, estimated_tokens FROM ob_keys`,
  );
  const out: KeyRecord[] = [];
  for (;;) {
    const page = await client.query<KeyRow>({
      text: `FETCH ${size} FROM ob_load_keys`,
      rowMode: 'array',
      types: keyRowTypes,
    });
    for (const r of page.rows) {
      const key = r[0];
      key.usage = {
        requests: r[1],
        promptTokens: r[2],
        completionTokens: r[3],
        reasoningTokens: r[5],
        errors: r[6],
        disconnects: r[7],
        estimatedTokens: r[9],
        firstUsedAt: r[8],
        byRoute: byRoute.get(key.id) ?? {},
      };
      key.lastUsedAt = r[4];
      out.push(key);
    }
    if (page.rows.length < size) break;
  }
  await client.query('CLOSE ob_load_keys');
  // Usually in that order already (rows are written as keys are made): a sort that finds it so
  // is one pass.
  return out.sort((a, b) =>
    a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? -1 : 1) : a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
  );
}
