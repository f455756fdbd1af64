/**
 * Whether this daemon is in sync with the database: it has read the change log, and the database
 * has taken a write of a revocation and of its row, both recently. Invariant: in sync as of the
 * older of the two, so a daemon that reads but cannot write (a database turned read-only, or
 * ob_revocations locked against writes) goes stale like one that cannot read, and each time is
 * when the read or write began, never when it ended: a write that waits behind a lock keeps the
 * daemon at the time it began waiting.
 */

// A write still unanswered after this long is named as the reason while it waits (a lock
// time-out names it only after several seconds).
const SLOW_WRITE_MS = 1000;

export class SyncState {
  private readAt = 0;
  private wroteAt = 0;
  private readProblem: string | null = null;
  private writeProblem: string | null = null;
  /** When the write under way began (null: none). */
  private writingSince: number | null = null;

  constructor(private readonly now: () => number) {}

  /** The whole state was read at `at` (ms): that counts as a write too, the row follows. */
  loaded(at: number): void {
    this.readAt = at;
    this.wroteAt = Math.max(this.wroteAt, at);
  }

  /** A read of the change log that began at `started` succeeded. */
  read(started: number): void {
    this.readAt = Math.max(this.readAt, started);
    this.readProblem = null;
  }

  readFailed(problem: string): void {
    this.readProblem = problem;
  }

  /** A write (a revocation's, then this daemon's row) began at `started`. */
  writing(started: number): void {
    this.writingSince = started;
  }

  /** The write that began at `started` succeeded. Returns whether writes had been failing. */
  wrote(started: number): boolean {
    this.writingSince = null;
    this.wroteAt = Math.max(this.wroteAt, started);
    const was = this.writeProblem !== null;
    this.writeProblem = null;
    return was;
  }

  writeFailed(problem: string): void {
    this.writingSince = null;
    this.writeProblem = problem;
  }

  /** When the change log was last read whole (ms since the epoch): what this daemon's row reports. */
  get inSyncAt(): number {
    return this.readAt;
  }

  /** The older of the last read of the change log and the last write that succeeded. */
  lastInSync(): number {
    return Math.min(this.readAt, this.wroteAt);
  }

  /** Why this daemon is not in sync, as the database said (null: it reads and writes). */
  problem(): string | null {
    if (this.readProblem !== null) return `cannot read the change log: ${this.readProblem}`;
    if (this.writeProblem !== null) return `cannot write: ${this.writeProblem}`;
    const waited = this.writingSince === null ? 0 : this.now() - this.writingSince;
    if (waited >= SLOW_WRITE_MS)
      return `cannot write: a write has waited ${(waited / 1000).toFixed(1)} s for the database (a lock held on ob_revocations or ob_daemons?)`;
    return null;
  }
}
