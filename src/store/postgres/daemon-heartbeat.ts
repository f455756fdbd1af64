import type pg from 'pg';
import { DEFAULT_MAX_STALE_MS } from '../../services/revocation-confirmation.js';
import { writeDaemonRow } from './daemon-row.js';
import { type Notices, errText } from './notices.js';
import type { RevocationCursor } from './revocations.js';
import type { SyncState } from './sync-state.js';

/**
 * This daemon's row in ob_daemons, written every catch-up period (daemon-row.ts holds the SQL)
 * in one statement with a probe that a revocation could be written now: reads and its own row
 * going through prove nothing for a revocation that waits behind a lock on ob_revocations.
 * Invariants: one write at a time, never awaited by the period (a write that hangs delays no
 * read); a write asked for while one is under way is made once that ends; a write counts as of
 * when it began, so while revocations would wait or fail this daemon is not in sync
 * (sync-state.ts), and its row, unwritten, ages until the others take it for gone.
 */

/** Who this daemon is, in its row. */
export interface DaemonIdentity {
  origin: string;
  /** Its process id (0: not given). */
  pid?: number;
  startedAt: string;
  /** Its --max-stale (ms). */
  maxStaleMs?: number;
}

/** How far this daemon has read: what its row says it has applied. */
export interface AppliedPosition {
  readonly lastChange: number;
  readonly revocationCursor: RevocationCursor | null;
}

export interface HeartbeatDeps {
  pool: pg.Pool;
  /** The store, as it may be shown. */
  location: string;
  now: () => number;
  notices: Notices;
  sync: SyncState;
  identity: DaemonIdentity;
  position: AppliedPosition;
}

export class DaemonHeartbeat {
  private beating: Promise<void> | null = null;
  /** Revocations were applied while a row write was under way: write it again once that ends. */
  private again = false;
  private closed = false;

  constructor(private readonly deps: HeartbeatDeps) {}

  /** Writes the row, unless a write is under way. */
  beat(): void {
    if (this.beating !== null || this.closed) return;
    const { pool, location, notices, sync, identity, position } = this.deps;
    const started = this.deps.now();
    sync.writing(started);
    this.beating = writeDaemonRow(pool, {
      origin: identity.origin,
      pid: identity.pid ?? 0,
      startedAt: identity.startedAt,
      appliedChange: position.lastChange,
      appliedRevocations: position.revocationCursor?.xmax ?? null,
      appliedXip: position.revocationCursor?.xip ?? [],
      inSyncAt: sync.inSyncAt,
      maxStaleMs: identity.maxStaleMs ?? DEFAULT_MAX_STALE_MS,
    })
      .then(
        () => {
          if (sync.wrote(started)) notices.say(`${location} takes this daemon's writes again.`);
        },
        (err: unknown) => {
          sync.writeFailed(errText(err));
          notices.say(
            `Cannot write to ${location} (${errText(err)}): serving from memory; keys are refused once it has refused writes for longer than --max-stale.`,
          );
        },
      )
      .finally(() => {
        this.beating = null;
        if (this.again) {
          this.again = false;
          this.beat();
        }
      });
  }

  /**
   * Revocations were applied: the row says so now rather than at the next period, so that a
   * `--wait` is confirmed within a read and a write of the revocation.
   */
  reportApplied(): void {
    if (this.beating === null) this.beat();
    else this.again = true;
  }

  /** No write after this; `idle()` waits for the one under way. */
  stop(): void {
    this.closed = true;
  }

  async idle(): Promise<void> {
    await this.beating;
  }
}
