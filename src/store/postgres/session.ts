import pg from 'pg';
import { tryChoresLock } from './chores.js';
import { type Notices, errText } from './notices.js';

/**
 * The daemon's one dedicated connection: it LISTENs for changes, and holds the chores lock
 * (chores.ts). Invariants: at most one is open, and one opening at a time; one that stops
 * answering its quick queries within SESSION_QUERY_TIMEOUT_MS is taken for gone (a half-open
 * connection) and replaced, since its notifications are lost meanwhile; the chores are held
 * only while the connection that took the lock is the one open.
 */

// The session connection's queries (LISTEN, the chores lock, its check) answer in milliseconds:
// one that does not answer within this is taken for gone silently.
const SESSION_QUERY_TIMEOUT_MS = 3000;

export interface SessionDeps {
  url: string;
  /** The store, as it may be shown. */
  location: string;
  /** The channel to LISTEN on; null: no LISTEN (the catch-up read alone, a test switch). */
  channel: string | null;
  notices: Notices;
  /** A notification arrived on the connection. */
  onNotification: (msg: pg.Notification) => void;
  /** The connection's application_name now (unwritten-label.ts): set again whenever it changes. */
  label: () => string;
}

export class SessionConnection {
  private session: pg.Client | null = null;
  private starting: Promise<void> | null = null;
  private checking: Promise<void> | null = null;
  private chores = false;
  /** The application_name the open connection has. */
  private labelled: string | null = null;
  /** A relabel waiting for the check under way. */
  private relabelling: Promise<void> | null = null;
  /** The store closed: no connection opens again. */
  private ended = false;

  constructor(private readonly deps: SessionDeps) {}

  /** Whether this daemon does the chores: its open connection holds the lock. */
  holdsChores(): boolean {
    return this.chores;
  }

  /** Once a period: checks the connection (taking the chores lock if free), or opens one. */
  check(): Promise<void> {
    this.checking ??= this.keep().finally(() => {
      this.checking = null;
    });
    return this.checking;
  }

  /**
   * The label changed (revocations held, or written): it is set now, not at the next period's
   * check, so the other daemons' status follows this daemon's own. A check under way may have
   * read the label before the change: one more follows it.
   */
  relabel(): Promise<void> {
    // One waits at most: a hundred revocations refused while the database is down ask for one
    // more check, not a hundred connection attempts in a row.
    this.relabelling ??= (this.checking ?? Promise.resolve())
      .then(() => {
        this.relabelling = null;
        return this.check();
      })
      .catch(() => {});
    return this.relabelling;
  }

  /** Waits for an opening or a check under way. */
  async idle(): Promise<void> {
    await this.starting?.catch(() => {});
    await this.checking?.catch(() => {});
  }

  /** The store closes: the connection is dropped, and none opens again. */
  end(): void {
    this.ended = true;
    this.drop();
  }

  /** `dead`: it stopped answering; its socket is closed rather than waiting on a goodbye. */
  drop(dead = false): void {
    const s = this.session;
    this.session = null;
    this.chores = false;
    if (s === null) return;
    if (dead) endNow(s);
    else void s.end().catch(() => {});
  }

  private async keep(): Promise<void> {
    if (this.ended) return;
    if (this.session !== null) {
      try {
        const label = this.deps.label();
        if (!this.chores) this.chores = await tryChoresLock(this.session);
        else if (label === this.labelled) await this.session.query('SELECT 1');
        if (label !== this.labelled) await this.setLabel(this.session, label);
        return;
      } catch (err) {
        this.deps.notices.say(`PostgreSQL session connection lost (${errText(err)}); opening another.`);
        this.drop(true);
      }
    }
    this.starting ??= this.start().finally(() => {
      this.starting = null;
    });
    await this.starting;
  }

  /** A setting, not a write: a database that refuses writes (read-only, a standby) takes it. */
  private async setLabel(client: pg.Client, label: string): Promise<void> {
    this.labelled = null;
    await client.query("SELECT set_config('application_name', $1, false)", [label]);
    this.labelled = label;
  }

  private async start(): Promise<void> {
    const { notices, channel } = this.deps;
    const client = new pg.Client({
      connectionString: this.deps.url,
      connectionTimeoutMillis: 3000,
      query_timeout: SESSION_QUERY_TIMEOUT_MS,
    });
    client.on('error', (err) => {
      notices.say(`PostgreSQL session connection lost (${errText(err)}).`);
      if (this.session === client) this.drop();
    });
    client.on('notification', this.deps.onNotification);
    try {
      await client.connect();
      if (channel !== null) await client.query(`LISTEN ${channel}`);
      // Set, not given at connect: an application_name in the store's URL would win there.
      await this.setLabel(client, this.deps.label());
      if (this.ended) {
        endNow(client);
        return;
      }
      this.session = client;
      this.chores = await tryChoresLock(client);
    } catch (err) {
      notices.say(
        `Cannot connect to ${this.deps.location} (${errText(err)}): serving from memory; keys are refused once out of sync for longer than --max-stale.`,
      );
      endNow(client);
      if (this.session === client) this.session = null;
    }
  }
}

/** Closes a client's socket at once: a connection that stopped answering never answers a Terminate. */
function endNow(client: pg.Client): void {
  void client.end().catch(() => {});
  (client as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.();
}
