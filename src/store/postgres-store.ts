import { randomUUID } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import pg from 'pg';
import type { Instance } from '../domain/instance.js';
import type { AuditEvent, KeyRecord, RevokeReason } from '../domain/key.js';
import { ObProxyError, obError } from '../errors.js';
import { applyBatch } from './postgres/apply.js';
import { pruneDaemonRows, readDaemonReports, writeDaemonRow } from './postgres/daemon-row.js';
import {
  REVOCATION_PAYLOAD,
  type RevocationCursor,
  cursorParams,
  insertRevocations,
  revocationsSince,
  revokedKey,
} from './postgres/revocations.js';
import { type JournalRecord, RevocationJournal } from './revocation-journal.js';
import { journalRecordOf } from './revoked-wins.js';
import { type TableCounts, countTables, countsOf, importData } from './postgres/import.js';
import { CHORES_LOCK, LOCK_SPACE, migrate } from './postgres/migrations.js';
import { loadUsageByRoute } from './postgres/usage.js';
import {
  type LimitCounts,
  type LimitExchange,
  STORE_VERSION,
  type Mutation,
  type Store,
  type StoreChange,
  type StoreData,
  type StoreFeed,
} from './store.js';
import { validateStoreData } from './store-validation.js';
import { DEFAULT_MAX_STALE_MS, type DaemonReports } from '../services/revocation-confirmation.js';

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
}

const CHANNEL = 'ob_proxy_changes';
// Keep the change log this long: a daemon away longer reloads the whole state instead.
const CHANGE_LOG_KEEP = '1 hour';
const PAGE = 500;
// A daemon's own limit rows are kept this many ticks (and a daemon that stopped writing is
// counted with its last row as long); rows of daemons gone are deleted after this long.
const LIMIT_ROWS_KEEP_TICKS = 8;
const LIMIT_ROWS_KEEP = '1 minute';
// The chores' pruning of the two tables runs this often: each run scans the change log (an hour
// of it), and rows kept a minute longer than their term change nothing.
const PRUNE_MS = 60_000;
// How long the daemon waits on one statement of the pool before it gives up (the server is told
// to give up a second sooner).
const QUERY_TIMEOUT_MS = 10_000;
/**
 * The settings of every pooled session. A transaction left idle (its daemon paused by Ctrl-Z or
 * a container pause while it held the counter row) is ended by the server after a few seconds,
 * which frees the row; a write waits for a lock a little longer than that, so a paused peer
 * costs the others a delay, not a failure, and a lock held by something else (a `psql` session)
 * fails the write after 5 s instead of holding this daemon's changes for the statement's 9 s.
 * Exported so that a test can hold the counter with the daemons' own settings.
 */
export const POOL_SESSION_SETTINGS = {
  // The server's own time-out, just under the client's: a statement the daemon gives up on
  // (waiting for a lock a stuck transaction holds) is cancelled there too, instead of waiting
  // on with its place in the queue, one more for every later write, until the server's
  // connections run out (test/regressions/postgres-timed-out-write-left-waiting.test.ts).
  statement_timeout: QUERY_TIMEOUT_MS - 1000,
  lock_timeout: 5000,
  idle_in_transaction_session_timeout: 4000,
} as const;
// Rows of daemons not seen for this long are deleted by the chores.
const DAEMON_ROWS_KEEP = '1 hour';
// A revocation in ob_revocations whose key is still active in ob_keys this long after: its
// daemon died before writing the change; the one doing the chores writes it.
const ORPHAN_AFTER = '1 minute';
// The session connection's queries (LISTEN, the chores lock, its check) answer in milliseconds:
// one that does not answer within this is taken for gone silently (a half-open connection), and
// replaced, since its notifications are lost meanwhile.
const SESSION_QUERY_TIMEOUT_MS = 3000;

/**
 * Query parameters whose values are shown. node-postgres reads every parameter of the URL as a
 * setting, `password` and `sslpassword` included (`postgres://ob@db/x?password=…` connects), so
 * the value of any other parameter is hidden: a name it does not know may hold a secret too.
 */
const SHOWN_PARAMS = new Set([
  'host',
  'port',
  'user',
  'dbname',
  'db',
  'application_name',
  'fallback_application_name',
  'client_encoding',
  'connect_timeout',
  'ssl',
  'sslmode',
  'sslrootcert',
  'sslcert',
  'sslkey',
  'target_session_attrs',
  'keepalives',
  'keepalives_idle',
  'statement_timeout',
  'query_timeout',
  'idle_in_transaction_session_timeout',
  'uselibpqcompat',
]);

/** The URL without its password (in the user part or the query) or fragment, for logs, errors and `status`. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = '';
    u.hash = '';
    const shown = new URLSearchParams();
    for (const [name, value] of u.searchParams) shown.append(name, SHOWN_PARAMS.has(name) ? value : '***');
    u.search = shown.toString();
    return u.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/**
 * The PostgreSQL store: several daemons share one database. Each keeps the whole registry in
 * memory (the request path never waits on the database) and hears every change made through the
 * others: a NOTIFY carrying the change number wakes a read of the change log, and a catch-up read
 * every `catchupMs` makes a lost notification cost one period. A gap in the numbers (this daemon
 * was away longer than the log is kept) reloads everything.
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
  private readonly notify: boolean;
  private readonly now: () => number;
  private lastChange = 0;
  /** When the change numbered `lastChange` was committed, as the database said: tells a restored database. */
  private lastChangeAt: string | null = null;
  /** Every key this daemon knows revoked: written back into a database that lost the revocation. */
  private readonly revoked = new Map<string, Revocation>();
  private inSyncAt = 0;
  /** When a write of this daemon's row that began then succeeded: a daemon that cannot write is not in sync. */
  private wroteAt = 0;
  private readProblem: string | null = null;
  private writeProblem: string | null = null;
  private beating: Promise<void> | null = null;
  /** Revocations were applied while a row write was under way: write it again once that ends. */
  private beatAgain = false;
  private readonly startedAt: string;
  /** How far ob_revocations has been read (null: not yet). */
  private revCursor: RevocationCursor | null = null;
  /** Keys whose revocation is in ob_revocations: every daemon refuses them. */
  private readonly shared = new Set<string>();
  /** Revocations to put into ob_revocations (from the journal, after a restart). */
  private readonly unshared = new Map<string, KeyRecord>();
  /** Revocations whose key the database still holds active, and that no running lifecycle writes. */
  private readonly writeBack = new Map<string, KeyRecord>();
  private settling: Promise<void> | null = null;
  private journal: RevocationJournal | null = null;
  /** Appends and the journal's drop, one at a time. */
  private journalQueue: Promise<unknown> = Promise.resolve();
  private feed: StoreFeed | null = null;
  private session: pg.Client | null = null;
  private sessionStarting: Promise<void> | null = null;
  private sessionCheck: Promise<void> | null = null;
  private chores = false;
  private prunedAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private pulling: Promise<void> | null = null;
  /** The first period's work (session, first read): a sync waits for it. */
  private following: Promise<void> | null = null;
  private pullAgain = false;
  private closed = false;
  private migrated = false;
  private lastNotice = '';
  private limits: LimitExchange | null = null;
  private limitsTimer: NodeJS.Timeout | undefined;
  private lastLimitTick = 0;
  private exchanging: Promise<void> | null = null;
  private limitsFailing = false;

  constructor(
    private readonly url: string,
    private readonly options: PostgresStoreOptions = {},
  ) {
    this.location = redactUrl(url);
    this.catchupMs = options.catchupMs ?? 500;
    this.notify = options.notify ?? true;
    this.now = options.now ?? Date.now;
    this.startedAt = new Date(this.now()).toISOString();
    // Fail fast when the database is away: a management command answers within seconds, and the
    // catch-up read notices on its next period.
    const config: pg.PoolConfig = {
      connectionString: url,
      connectionTimeoutMillis: 3000,
      query_timeout: QUERY_TIMEOUT_MS,
      ...POOL_SESSION_SETTINGS,
      idleTimeoutMillis: 10_000,
    };
    // Two pools: the transactions that take the counter row wait for it, and may all wait at
    // once behind a session holding it; the change-log reads, revocations and this daemon's row
    // never wait for it, so they must never wait for a connection behind those either.
    this.pool = new pg.Pool({ ...config, max: 4 });
    this.writers = new pg.Pool({ ...config, max: 3 });
    // An idle client whose server went away: without a listener this would end the process.
    for (const p of [this.pool, this.writers])
      p.on('error', (err) => this.notice(`PostgreSQL connection lost (${errText(err)}).`));
  }

  private notice(message: string): void {
    // The same failure every period is said once, until something else happens.
    if (message === this.lastNotice) return;
    this.lastNotice = message;
    this.options.onNotice?.(message);
  }

  async load(): Promise<StoreData> {
    if (this.journal === null && this.options.journalPath !== undefined) {
      this.journal = await RevocationJournal.open(this.options.journalPath);
      for (const n of this.journal.notices) this.notice(n);
    }
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw new Error(
        `The store ${this.location} cannot be reached (${errText(err)}). Check that PostgreSQL is running and the URL is right.`,
        { cause: err },
      );
    }
    try {
      if (!this.migrated) {
        await migrate(client, this.location);
        this.migrated = true;
      }
      // One snapshot: the data and the change number it includes, so following starts exactly there.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const head = await client.query<{ change_no: string; at: string | null }>(
        'SELECT change_no, (SELECT at::text FROM ob_changes WHERE no = change_no) AS at FROM ob_meta WHERE id = 1',
      );
      const instances = await client.query<{ record: Instance }>('SELECT record FROM ob_instances ORDER BY id');
      const keys = await client.query<{
        record: KeyRecord;
        requests: string;
        prompt_tokens: string;
        completion_tokens: string;
        last_used_at: string | null;
        reasoning_tokens: string;
        errors: string;
        disconnects: string;
        first_used_at: string | null;
        estimated_tokens: string;
      }>(
        "SELECT record, requests, prompt_tokens, completion_tokens, last_used_at, reasoning_tokens, errors, disconnects, first_used_at, estimated_tokens FROM ob_keys ORDER BY record->>'createdAt', id",
      );
      const byRoute = await loadUsageByRoute(client);
      const events = await client.query<{ record: AuditEvent }>('SELECT record FROM ob_events ORDER BY seq');
      // The same snapshot: the revocations it holds, and where the next read of them starts.
      const revs = await client.query<{ rev_xmax: string; rev_xip: string[]; revocations: KeyRecord[] }>(
        `SELECT ${revocationsSince(1)}`,
        cursorParams(null),
      );
      await client.query('COMMIT');
      this.lastChange = Number(head.rows[0]!.change_no);
      this.lastChangeAt = head.rows[0]!.at;
      this.revCursor = { xmax: revs.rows[0]!.rev_xmax, xip: revs.rows[0]!.rev_xip };
      this.inSyncAt = this.now();
      this.wroteAt = Math.max(this.wroteAt, this.inSyncAt);
      const data: StoreData = {
        version: STORE_VERSION,
        instances: instances.rows.map((r) => r.record),
        keys: keys.rows.map((r) => ({
          ...r.record,
          usage: {
            requests: Number(r.requests),
            promptTokens: Number(r.prompt_tokens),
            completionTokens: Number(r.completion_tokens),
            reasoningTokens: Number(r.reasoning_tokens),
            errors: Number(r.errors),
            disconnects: Number(r.disconnects),
            estimatedTokens: Number(r.estimated_tokens),
            firstUsedAt: r.first_used_at,
            byRoute: byRoute.get(r.record.id) ?? {},
          },
          lastUsedAt: r.last_used_at,
        })),
        events: events.rows.map((r) => r.record),
      };
      const valid = validateStoreData(this.location, data);
      this.revokedWins(valid, revs.rows[0]!.revocations, this.journal?.records() ?? []);
      for (const key of valid.keys) if (key.status === 'revoked') this.remember(key);
      return valid;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /**
   * Revoked wins over the rows of ob_keys: a key in ob_revocations, or in this daemon's journal
   * of revocations the database did not take, is revoked in `data` (in place). Those the
   * database still holds active are written back by the next periods (settle()): a journal's
   * into ob_revocations first, then every one as a change, with its audit event.
   */
  private revokedWins(data: StoreData, rows: readonly KeyRecord[], journal: readonly JournalRecord[]): void {
    const byId = new Map(data.keys.map((k) => [k.id, k]));
    const byHash = new Map(data.keys.map((k) => [k.hash, k]));
    const revoke = (key: KeyRecord, at: string, reason: RevokeReason): void => {
      if (key.status !== 'active') return;
      key.status = 'revoked';
      key.revokedAt = at;
      key.revokeReason = reason;
      this.writeBack.set(key.id, { ...key });
    };
    for (const r of rows) {
      this.shared.add(r.id);
      const key = byId.get(r.id);
      if (key !== undefined) revoke(key, r.revokedAt ?? new Date(this.now()).toISOString(), r.revokeReason ?? 'manual');
    }
    for (const j of journal) {
      const key = byId.get(j.keyId) ?? byHash.get(j.keyHash);
      if (key === undefined) continue;
      revoke(key, j.at, j.reason);
      if (!this.shared.has(key.id)) this.unshared.set(key.id, { ...key });
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
          m.op === 'putKey' && m.key.status === 'revoked' && !this.shared.has(m.key.id) ? [m.key] : [],
        );
    if (revoked.length > 0) await this.shareRevocations(revoked);
    await this.commitDecided(() => Promise.resolve(mutations));
  }

  /**
   * Puts revocations into ob_revocations, where every daemon reads them within a catch-up
   * period. Those the database does not take go into this daemon's journal (synced before the
   * caller acknowledges anything), so they survive a kill -9 and are written once it takes
   * writes. Never throws: the change that follows says whether the store was written.
   */
  private async shareRevocations(keys: readonly KeyRecord[]): Promise<void> {
    try {
      await insertRevocations(this.pool, keys, this.origin, CHANNEL);
      for (const k of keys) {
        this.shared.add(k.id);
        this.unshared.delete(k.id);
        this.remember(k);
      }
    } catch (err) {
      for (const k of keys) this.unshared.set(k.id, { ...k });
      const journal = this.journal;
      if (journal === null) return;
      const records = keys.map(journalRecordOf);
      const appended = this.journalQueue.then(() => journal.append(records));
      this.journalQueue = appended.catch(() => {});
      await appended.catch((jerr: unknown) =>
        this.notice(
          `Could not record ${keys.length} revocation(s) in ${journal.path} (${errText(jerr)}) after ${this.location} refused them (${errText(err)}): they hold in this daemon's memory until the database takes them.`,
        ),
      );
    }
  }

  isRevocationDurable(keyId: string): boolean {
    return this.shared.has(keyId) || this.journal?.has(keyId) === true;
  }

  isRevocationShared(keyId: string): boolean {
    return this.shared.has(keyId);
  }

  /**
   * One write: `decide` gives the batch once the counter is taken (no other write runs, on any
   * daemon), so it may look at the rows first; an empty batch writes nothing. Returns the batch.
   */
  private async commitDecided(
    decide: (client: pg.PoolClient) => Promise<readonly Mutation[]>,
  ): Promise<readonly Mutation[]> {
    let client: pg.PoolClient | undefined;
    try {
      client = await this.writers.connect();
      await client.query('BEGIN');
      // The counter first: it serialises every write, on every daemon (migrations.ts).
      const { rows } = await client.query<{ change_no: string }>(
        'UPDATE ob_meta SET change_no = change_no + 1 WHERE id = 1 RETURNING change_no',
      );
      const no = Number(rows[0]!.change_no);
      const mutations = await decide(client);
      if (mutations.length === 0) {
        await client.query('ROLLBACK');
        client.release();
        return mutations;
      }
      const applied = await applyBatch(client, mutations, new Date(this.now()).toISOString());
      // The change and its notification in one statement: the counter row is held for as few
      // round trips as can be. Delivered at commit, to every listening daemon (this one too: it
      // reads back the extras).
      await client.query(
        'WITH c AS (INSERT INTO ob_changes (no, origin, mutations, extra) VALUES ($1, $2, $3, $4)) SELECT pg_notify($5, $1::text)',
        [no, this.origin, JSON.stringify(applied.mutations), JSON.stringify(applied.extra), CHANNEL],
      );
      await client.query('COMMIT');
      client.release();
      client = undefined;
      for (const m of mutations) if (m.op === 'putKey' && m.key.status === 'revoked') this.remember(m.key);
      // What the store did on this daemon's behalf arrives by the feed; ask for it now.
      if (applied.extra.length > 0) this.wake();
      return mutations;
    } catch (err) {
      if (client !== undefined) {
        await client.query('ROLLBACK').catch(() => {});
        client.release(err instanceof ObProxyError ? undefined : (err as Error));
      }
      if (err instanceof ObProxyError) throw err;
      throw obError('store_write_failed', {
        message: `The store ${this.location} could not be written (${errText(err)}); nothing was changed. Check that PostgreSQL is running and reachable.`,
        cause: err,
      });
    }
  }

  /**
   * `ob-proxy store migrate`: writes a whole store into this database in one transaction, after
   * checking it is empty (unless `force`), and verifies the counts before committing: a copy
   * that does not match changes nothing.
   */
  async replaceAll(data: StoreData, force: boolean): Promise<TableCounts> {
    const client = await this.writers.connect();
    try {
      if (!this.migrated) {
        await migrate(client, this.location);
        this.migrated = true;
      }
      await client.query('BEGIN');
      // The counter row first, as every write does: no daemon writes meanwhile.
      await client.query('SELECT change_no FROM ob_meta WHERE id = 1 FOR UPDATE');
      const before = await countTables(client);
      if (!force && before.instances + before.keys + before.events > 0) {
        throw new Error(
          `The store ${this.location} is not empty (${before.instances} instance(s), ${before.keys} key(s), ${before.events} event(s)); nothing was changed. Pass --force to replace its contents.`,
        );
      }
      await importData(client, data);
      const expected = countsOf(data);
      const found = await countTables(client);
      const wrong = (Object.keys(expected) as (keyof TableCounts)[]).filter((k) => expected[k] !== found[k]);
      if (wrong.length > 0) {
        throw new Error(
          `The copy into ${this.location} does not match (${wrong.map((k) => `${k}: ${expected[k]} expected, ${found[k]} found`).join('; ')}); nothing was changed.`,
        );
      }
      await client.query('COMMIT');
      return found;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** The older of the last read of the change log and the last write of this daemon's row that succeeded. */
  lastInSync(): number {
    return Math.min(this.inSyncAt, this.wroteAt);
  }

  /** Why this daemon is not in sync, as the database said (null: it reads and writes). */
  syncProblem(): string | null {
    if (this.readProblem !== null) return `cannot read the change log: ${this.readProblem}`;
    if (this.writeProblem !== null) return `cannot write: ${this.writeProblem}`;
    return null;
  }

  holdsChores(): boolean {
    return this.chores;
  }

  subscribe(feed: StoreFeed): void {
    this.feed = feed;
    this.following = this.tick(true);
  }

  async sync(): Promise<void> {
    await this.following;
    this.wake();
    await this.pulling;
  }

  shareLimits(exchange: LimitExchange): void {
    this.limits = exchange;
    this.scheduleLimits();
  }

  /** The next tick: the next multiple of the period, the same instant on every daemon. */
  private scheduleLimits(): void {
    if (this.closed || this.limits === null) return;
    const p = this.limits.periodMs;
    this.limitsTimer = setTimeout(() => this.limitTick(), p - (this.now() % p) + 1);
    this.limitsTimer.unref();
  }

  private limitTick(): void {
    const ex = this.limits!;
    const now = this.now();
    const tick = Math.floor(now / ex.periodMs);
    this.scheduleLimits();
    // A round trip still under way (a slow database): this tick is skipped, its demand counted in the next.
    if (tick <= this.lastLimitTick || this.exchanging !== null) return;
    // No key has a limit: a row of nothing would be written and read back four times a second.
    if (ex.needed?.() === false) return;
    this.lastLimitTick = tick;
    this.exchanging = this.exchangeLimits(ex, tick, ex.capture(now)).finally(() => {
      this.exchanging = null;
    });
  }

  /**
   * One statement a tick: this daemon's counts written for this tick, its rows of long ago
   * deleted, and every daemon's counts of the tick before read back. That tick's rows were all
   * written a period ago, so every daemon reads the same ones (not a race between the writes).
   * A daemon whose last write is older (slow, or cut off from the database) counts with its
   * latest row for a few more ticks, so the others do not share out what it may still be using.
   */
  private async exchangeLimits(ex: LimitExchange, tick: number, counts: LimitCounts): Promise<void> {
    try {
      // The commit does not wait for the WAL to reach the disk (synchronous_commit off for this
      // statement's transaction alone, set in it so that it costs no round trip): a row is worth
      // one tick, and one lost in a server crash is a tick whose write failed. Read by the insert,
      // so that it is set whatever else the statement finds.
      const { rows } = await this.pool.query<{ node: string; counts: LimitCounts }>(
        `WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
              put AS (INSERT INTO ob_limit_counts (tick, node, counts) SELECT $1, $2, $3 FROM async
                        ON CONFLICT (tick, node) DO UPDATE SET counts = EXCLUDED.counts, at = now()),
              old AS (DELETE FROM ob_limit_counts WHERE node = $2 AND tick < $4)
         SELECT DISTINCT ON (node) node, counts FROM ob_limit_counts WHERE tick BETWEEN $4 AND $5 ORDER BY node, tick DESC`,
        [tick, this.origin, JSON.stringify(counts), tick - LIMIT_ROWS_KEEP_TICKS, tick - 1],
      );
      const nodes = new Map<string, LimitCounts>();
      for (const r of rows) if (isLimitCounts(r.counts)) nodes.set(r.node, r.counts);
      ex.received({ tick: tick - 1, self: this.origin, nodes });
      if (this.limitsFailing)
        this.options.onNotice?.(`Exchanging per-key limit counts through ${this.location} again.`);
      this.limitsFailing = false;
    } catch (err) {
      // Said once, apart from the change log's notices: this runs every period.
      if (!this.limitsFailing)
        this.options.onNotice?.(
          `Cannot exchange per-key limit counts through ${this.location} (${errText(err)}): this daemon keeps to its last share of each key's limits.`,
        );
      this.limitsFailing = true;
    }
  }

  /** Reads the change log now (a notification, or a commit that made extras). */
  private wake(): void {
    if (this.feed === null || this.closed) return;
    if (this.pulling !== null) {
      this.pullAgain = true;
      return;
    }
    this.pulling = this.pullLoop().finally(() => {
      this.pulling = null;
    });
  }

  private async pullLoop(): Promise<void> {
    do {
      this.pullAgain = false;
      const started = this.now();
      try {
        await this.pull();
        // In sync as of when the read began: nothing committed before then is unheard.
        this.inSyncAt = Math.max(this.inSyncAt, started);
        this.readProblem = null;
        if (this.lastNotice.startsWith('Cannot')) this.notice(`In sync with ${this.location} again.`);
      } catch (err) {
        this.readProblem = errText(err);
        this.notice(
          `Cannot read the change log of ${this.location} (${errText(err)}): serving from memory; keys are refused once out of sync for longer than --max-stale.`,
        );
        return;
      }
    } while (this.pullAgain && !this.closed);
  }

  private async pull(): Promise<void> {
    for (;;) {
      // One statement, so one snapshot: a change's row and the counter commit together, so here
      // the head and the rows agree, and a gap seen is a real one (pruned), never a commit that
      // landed between two reads.
      // The revocations committed since the last read, in the same snapshot.
      const {
        rows: [page],
      } = await this.pool.query<{
        head: string;
        last_at: string | null;
        changes: { no: number; at: string; origin: string; mutations: Mutation[]; extra: Mutation[] }[];
        rev_xmax: string;
        rev_xip: string[];
        revocations: KeyRecord[];
      }>(
        `SELECT (SELECT change_no FROM ob_meta WHERE id = 1) AS head,
           (SELECT at::text FROM ob_changes WHERE no = $1) AS last_at,
           coalesce((SELECT json_agg(c ORDER BY c.no) FROM
             (SELECT no, at::text AS at, origin, mutations, extra FROM ob_changes WHERE no > $1 ORDER BY no LIMIT $2) c), '[]'::json) AS changes,
           ${revocationsSince(3)}`,
        [this.lastChange, PAGE, ...cursorParams(this.revCursor)],
      );
      await this.applyRevocations(page!.revocations);
      this.revCursor = { xmax: page!.rev_xmax, xip: page!.rev_xip };
      if (page!.revocations.length > 0) this.reportApplied();
      const head = Number(page!.head);
      const rows = page!.changes;
      // The database went back in time (restored from an older backup, a failover to a replica
      // that lagged, or another database): the numbers this daemon passed are being given again
      // to new changes, which reading on from its own number would skip, a revocation among them.
      if (head < this.lastChange) {
        await this.reload(
          `its change log went back from change ${this.lastChange} to ${head} (restored from an older backup, or another database)`,
        );
        return;
      }
      if (this.lastChangeAt !== null && page!.last_at !== null && page!.last_at !== this.lastChangeAt) {
        await this.reload(
          `its change ${this.lastChange} is not the one this daemon heard (restored from an older backup, or another database)`,
        );
        return;
      }
      if (rows.length === 0) {
        if (head > this.lastChange) await this.reload('the change log no longer holds the changes it missed');
        return;
      }
      if (Number(rows[0]!.no) !== this.lastChange + 1) {
        await this.reload(
          `changes ${this.lastChange + 1} to ${Number(rows[0]!.no) - 1} are no longer in the change log`,
        );
        return;
      }
      const changes: StoreChange[] = [];
      for (const r of rows) {
        for (const m of [...r.mutations, ...r.extra])
          if (m.op === 'putKey' && m.key.status === 'revoked') this.remember(m.key);
        const mutations = r.origin === this.origin ? r.extra : [...r.mutations, ...r.extra];
        if (mutations.length > 0) changes.push({ no: Number(r.no), mutations });
      }
      if (changes.length > 0) await this.feed?.changes(changes);
      const last = rows[rows.length - 1]!;
      this.lastChange = Number(last.no);
      this.lastChangeAt = last.at;
      if (rows.length < PAGE) return;
    }
  }

  /**
   * Revocations read from ob_revocations, applied as any revocation heard from another daemon
   * (its key's in-flight work ends within the daemon's sweep). The key.revoked audit event, with
   * its number, comes with the change that follows. A key already known revoked: nothing to do.
   */
  private async applyRevocations(records: readonly KeyRecord[]): Promise<void> {
    const fresh: Mutation[] = [];
    for (const r of records) {
      this.shared.add(r.id);
      this.unshared.delete(r.id);
      if (this.revoked.has(r.id)) continue;
      const key = revokedKey(r);
      this.remember(key);
      fresh.push({ op: 'putKey', key });
    }
    if (fresh.length > 0) await this.feed?.changes([{ no: this.lastChange, mutations: fresh }]);
  }

  private async reload(why: string): Promise<void> {
    this.notice(`Reloading the whole state from ${this.location}: ${why}.`);
    const before = { no: this.lastChange, at: this.lastChangeAt };
    const data = await this.load();
    try {
      await this.writeBackRevocations(data);
    } catch (err) {
      // Not written back: the next period finds the same state and tries again.
      this.lastChange = before.no;
      this.lastChangeAt = before.at;
      throw err;
    }
    await this.feed?.reload(data);
  }

  private remember(key: KeyRecord): void {
    if (this.revoked.has(key.id)) return;
    this.revoked.set(key.id, {
      at: key.revokedAt ?? new Date(this.now()).toISOString(),
      reason: key.revokeReason ?? 'manual',
    });
  }

  /**
   * Revoked wins, across a database that lost revocations (restored from an older backup): every
   * key this daemon knows revoked that the database holds active is revoked in it again, with
   * its audit event, before the state is applied; `data` is changed to match. The lowdb store
   * does the same from its revocation journal.
   */
  private async writeBackRevocations(data: StoreData): Promise<void> {
    const mutations: Mutation[] = [];
    const events: AuditEvent[] = [];
    for (const key of data.keys) {
      const r = key.status === 'active' ? this.revoked.get(key.id) : undefined;
      if (r === undefined) continue;
      key.status = 'revoked';
      key.revokedAt = r.at;
      key.revokeReason = r.reason;
      const event: AuditEvent = {
        seq: 0,
        at: r.at,
        type: 'key.revoked',
        instance: key.instance,
        keyId: key.id,
        keyName: key.name,
        reason: r.reason,
      };
      mutations.push({ op: 'putKey', key: { ...key } }, { op: 'appendEvent', event });
      events.push(event);
    }
    if (mutations.length === 0) return;
    // Only the keys still active once the counter is taken: another daemon reloading at the same
    // time may have written them back first (its events then reach this one by the change log).
    const written = await this.commitDecided(async (client) => {
      const { rows } = await client.query<{ id: string }>(
        "SELECT id FROM ob_keys WHERE id = ANY($1::text[]) AND status = 'active'",
        [events.map((e) => e.keyId)],
      );
      const active = new Set(rows.map((r) => r.id));
      return mutations.filter((m) =>
        active.has(m.op === 'putKey' ? m.key.id : (m as { event: AuditEvent }).event.keyId!),
      );
    });
    // Numbered by the commit, in place.
    const revokedAgain = written.flatMap((m) => (m.op === 'appendEvent' ? [m.event] : []));
    data.events.push(...revokedAgain);
    if (revokedAgain.length > 0)
      this.notice(
        `${revokedAgain.length} key(s) revoked before were active in ${this.location} (${revokedAgain
          .slice(0, 10)
          .map((e) => e.keyId)
          .join(', ')}${revokedAgain.length > 10 ? ', …' : ''}): revoked in it again.`,
      );
  }

  /**
   * Every period: read the change log, keep the session connection (LISTEN and the chores lock)
   * up, and, holding the chores lock, prune the change log (once a minute).
   */
  private async tick(first = false): Promise<void> {
    if (this.closed) return;
    try {
      // The catch-up read bounds a lost notification, so it never waits on the session: one
      // gone silent answers only at its time-out. The first period sets LISTEN up before a sync.
      const checked = this.checkSession();
      if (first) await checked;
      this.wake();
      // Beside the read, never awaited by the period: a write that hangs delays neither.
      this.beat();
      await this.pulling;
      this.settle();
      // On the pool: the session answers only its own quick queries, within its time-out.
      if (this.chores && !this.closed && this.now() - this.prunedAt >= PRUNE_MS) {
        this.prunedAt = this.now();
        await this.pool
          .query(`DELETE FROM ob_changes WHERE at < now() - interval '${CHANGE_LOG_KEEP}' AND no < $1`, [
            this.lastChange,
          ])
          .catch(() => {});
        await this.pool
          .query(`DELETE FROM ob_limit_counts WHERE at < now() - interval '${LIMIT_ROWS_KEEP}'`)
          .catch(() => {});
        await pruneDaemonRows(this.pool, DAEMON_ROWS_KEEP).catch(() => {});
        await this.findOrphans().catch(() => {});
      }
    } finally {
      if (!this.closed) {
        this.timer = setTimeout(() => void this.tick(), this.catchupMs);
        this.timer.unref();
      }
    }
  }

  /** Writes this daemon's row (one at a time): while it fails, this daemon is not in sync. */
  private beat(): void {
    if (this.beating !== null || this.closed) return;
    const started = this.now();
    this.beating = writeDaemonRow(this.pool, {
      origin: this.origin,
      pid: this.options.pid ?? 0,
      startedAt: this.startedAt,
      appliedChange: this.lastChange,
      appliedRevocations: this.revCursor?.xmax ?? null,
      appliedXip: this.revCursor?.xip ?? [],
      inSyncAt: this.inSyncAt,
      maxStaleMs: this.options.maxStaleMs ?? DEFAULT_MAX_STALE_MS,
    })
      .then(
        () => {
          this.wroteAt = Math.max(this.wroteAt, started);
          if (this.writeProblem !== null) this.notice(`${this.location} takes this daemon's writes again.`);
          this.writeProblem = null;
        },
        (err: unknown) => {
          this.writeProblem = errText(err);
          this.notice(
            `Cannot write to ${this.location} (${errText(err)}): serving from memory; keys are refused once it has refused writes for longer than --max-stale.`,
          );
        },
      )
      .finally(() => {
        this.beating = null;
        if (this.beatAgain) {
          this.beatAgain = false;
          this.beat();
        }
      });
  }

  /**
   * Revocations were applied: the row says so now rather than at the next period, so that a
   * `--wait` is confirmed within a read and a write of the revocation.
   */
  private reportApplied(): void {
    if (this.beating === null) this.beat();
    else this.beatAgain = true;
  }

  /** Every daemon's row, and which of them have applied the revocations of `keyIds`. */
  daemonReports(keyIds: readonly string[]): Promise<DaemonReports> {
    return readDaemonReports(this.pool, keyIds, this.origin);
  }

  /**
   * Writes what this daemon holds that the database lacks (one at a time, every period): the
   * revocations of its journal into ob_revocations, then, as a change with its audit event,
   * every revocation whose key the database holds active and no running daemon is writing (its
   * daemon restarted, or died). Then drops the journal's entries, all in ob_revocations.
   */
  private settle(): void {
    if (this.settling !== null || this.closed) return;
    if (this.unshared.size === 0 && this.writeBack.size === 0 && (this.journal?.records().length ?? 0) === 0) return;
    this.settling = this.settleNow()
      .catch(() => {
        // The next period tries again; the failure is the database's, said by the read or the row.
      })
      .finally(() => {
        this.settling = null;
      });
  }

  private async settleNow(): Promise<void> {
    if (this.unshared.size > 0) {
      const keys = [...this.unshared.values()];
      await insertRevocations(this.pool, keys, this.origin, CHANNEL);
      for (const k of keys) {
        this.shared.add(k.id);
        this.unshared.delete(k.id);
      }
    }
    if (this.writeBack.size > 0) {
      const keys = [...this.writeBack.values()];
      const written = await this.writeRevoked(keys);
      for (const k of keys) this.writeBack.delete(k.id);
      if (written.length > 0)
        this.notice(
          `${written.length} revocation(s) the database lacked written to ${this.location} (${written
            .slice(0, 10)
            .map((e) => e.keyId)
            .join(', ')}${written.length > 10 ? ', …' : ''}).`,
        );
    }
    await this.dropJournal();
  }

  /**
   * The change that revokes keys the database may hold active: only those still active once the
   * counter is taken (another daemon may have written them meanwhile), each with its audit
   * event, which this daemon hears too. Returns the events written.
   */
  private async writeRevoked(keys: readonly KeyRecord[]): Promise<AuditEvent[]> {
    const mutations: Mutation[] = [];
    for (const key of keys) {
      const event: AuditEvent = {
        seq: 0,
        at: key.revokedAt ?? new Date(this.now()).toISOString(),
        type: 'key.revoked',
        instance: key.instance,
        keyId: key.id,
        keyName: key.name,
        reason: key.revokeReason ?? 'manual',
      };
      mutations.push({ op: 'putKey', key: { ...key, status: 'revoked' } }, { op: 'appendEvent', event });
    }
    const written = await this.commitDecided(async (client) => {
      const { rows } = await client.query<{ id: string }>(
        "SELECT id FROM ob_keys WHERE id = ANY($1::text[]) AND status = 'active'",
        [keys.map((k) => k.id)],
      );
      const active = new Set(rows.map((r) => r.id));
      return mutations.filter((m) =>
        active.has(m.op === 'putKey' ? m.key.id : (m as { event: AuditEvent }).event.keyId!),
      );
    });
    const events = written.flatMap((m) => (m.op === 'appendEvent' ? [m.event] : []));
    // This daemon's own changes are not read back: its audit trail gets the events here.
    if (events.length > 0)
      await this.feed?.changes([
        { no: this.lastChange, mutations: events.map((event) => ({ op: 'appendEvent', event })) },
      ]);
    return events;
  }

  /** The journal holds only revocations the database has not taken: once it has them all, it is emptied. */
  private async dropJournal(): Promise<void> {
    const journal = this.journal;
    if (journal === null) return;
    const dropped = this.journalQueue.then(async () => {
      const records = journal.records();
      if (records.length === 0 || !records.every((r) => this.shared.has(r.keyId))) return;
      await journal.close();
      await unlink(journal.path);
      this.journal = await RevocationJournal.open(journal.path);
    });
    this.journalQueue = dropped.catch(() => {});
    await dropped;
  }

  /** Revocations whose daemon died before writing their change: the chores write them. */
  private async findOrphans(): Promise<void> {
    const { rows } = await this.pool.query<{ record: KeyRecord }>(
      `SELECT r.record FROM ob_revocations r JOIN ob_keys k ON k.id = r.key_id
        WHERE k.status = 'active' AND r.at < now() - interval '${ORPHAN_AFTER}' LIMIT ${PAGE}`,
    );
    for (const r of rows) this.writeBack.set(r.record.id, revokedKey(r.record));
  }

  /**
   * One dedicated connection per daemon: it LISTENs, and holds the chores lock, a session
   * advisory lock that PostgreSQL releases the moment the connection ends (the daemon died), so
   * another daemon takes it at its next period.
   */
  private checkSession(): Promise<void> {
    this.sessionCheck ??= this.keepSession().finally(() => {
      this.sessionCheck = null;
    });
    return this.sessionCheck;
  }

  private async keepSession(): Promise<void> {
    if (this.session !== null) {
      try {
        if (!this.chores) this.chores = await this.tryChoresLock(this.session);
        else await this.session.query('SELECT 1');
        return;
      } catch (err) {
        this.notice(`PostgreSQL session connection lost (${errText(err)}); opening another.`);
        this.dropSession(true);
      }
    }
    this.sessionStarting ??= this.startSession().finally(() => {
      this.sessionStarting = null;
    });
    await this.sessionStarting;
  }

  private async startSession(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: 3000,
      query_timeout: SESSION_QUERY_TIMEOUT_MS,
    });
    client.on('error', (err) => {
      this.notice(`PostgreSQL session connection lost (${errText(err)}).`);
      if (this.session === client) this.dropSession();
    });
    client.on('notification', (msg) => {
      if (msg.channel === CHANNEL && (msg.payload === REVOCATION_PAYLOAD || Number(msg.payload) > this.lastChange))
        this.wake();
    });
    try {
      await client.connect();
      if (this.notify) await client.query(`LISTEN ${CHANNEL}`);
      this.session = client;
      this.chores = await this.tryChoresLock(client);
    } catch (err) {
      this.notice(
        `Cannot connect to ${this.location} (${errText(err)}): serving from memory; keys are refused once out of sync for longer than --max-stale.`,
      );
      endNow(client);
      if (this.session === client) this.session = null;
    }
  }

  private async tryChoresLock(client: pg.Client): Promise<boolean> {
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS locked', [
      LOCK_SPACE,
      CHORES_LOCK,
    ]);
    return rows[0]?.locked === true;
  }

  /** `dead`: it stopped answering; its socket is closed rather than waiting on a goodbye. */
  private dropSession(dead = false): void {
    const s = this.session;
    this.session = null;
    this.chores = false;
    if (s === null) return;
    if (dead) endNow(s);
    else void s.end().catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.limitsTimer);
    await this.exchanging;
    await this.pulling?.catch(() => {});
    await this.sessionStarting?.catch(() => {});
    await this.sessionCheck?.catch(() => {});
    await this.beating;
    await this.settling;
    await this.journalQueue;
    await this.journal?.close();
    this.dropSession();
    await this.pool.end().catch(() => {});
    await this.writers.end().catch(() => {});
  }
}

/** A revocation this daemon knows, enough to write it again. */
interface Revocation {
  at: string;
  reason: RevokeReason;
}

/** A row as this version writes it (another version's, or a damaged one, is left out of the split). */
function isLimitCounts(x: unknown): x is LimitCounts {
  const c = x as LimitCounts | null;
  return (
    typeof c === 'object' && c !== null && typeof c.window === 'number' && typeof c.keys === 'object' && c.keys !== null
  );
}

/** Closes a client's socket at once: a connection that stopped answering never answers a Terminate. */
function endNow(client: pg.Client): void {
  void client.end().catch(() => {});
  (client as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.();
}

function errText(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (typeof e.code === 'string' && e.code !== '')
    return e.message !== undefined && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.code;
  return e.message ?? String(err);
}
