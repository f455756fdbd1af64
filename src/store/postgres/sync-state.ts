/**
 * Whether this daemon is in sync with the database: it has read the change log, and the database
 * has taken a write of its row, both recently. Invariant: in sync as of the older of the two, so
 * a daemon that reads but cannot write (a database turned read-only) goes stale like one that
 * cannot read, and each time is when the read or write began, never when it ended.
 */
export class SyncState {
  private readAt = 0;
  private wroteAt = 0;
  private readProblem: string | null = null;
  private writeProblem: string | null = null;

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

  /** A write of this daemon's row that began at `started` succeeded. Returns whether writes had been failing. */
  wrote(started: number): boolean {
    this.wroteAt = Math.max(this.wroteAt, started);
    const was = this.writeProblem !== null;
    this.writeProblem = null;
    return was;
  }

  writeFailed(problem: string): void {
    this.writeProblem = problem;
  }

  /** When the change log was last read whole (ms since the epoch): what this daemon's row reports. */
  get inSyncAt(): number {
    return this.readAt;
  }

  /** The older of the last read of the change log and the last write of this daemon's row that succeeded. */
  lastInSync(): number {
    return Math.min(this.readAt, this.wroteAt);
  }

  /** Why this daemon is not in sync, as the database said (null: it reads and writes). */
  problem(): string | null {
    if (this.readProblem !== null) return `cannot read the change log: ${this.readProblem}`;
    if (this.writeProblem !== null) return `cannot write: ${this.writeProblem}`;
    return null;
  }
}
