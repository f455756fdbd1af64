/**
 * What the PostgreSQL store tells the operator. Invariant: the same notice is said once, until
 * another is said (a failure seen every period is one log line, not one a period), and a
 * PostgreSQL error is named by its code and message, as the server gave them.
 */
export class Notices {
  private lastSaid = '';

  constructor(private readonly onNotice?: (message: string) => void) {}

  say(message: string): void {
    if (message === this.lastSaid) return;
    this.lastSaid = message;
    this.onNotice?.(message);
  }

  /** The last notice said ('' before any). */
  get last(): string {
    return this.lastSaid;
  }
}

/** An error as the operator reads it: `code: message` for a PostgreSQL one. */
export function errText(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (typeof e.code === 'string' && e.code !== '')
    return e.message !== undefined && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.code;
  return e.message ?? String(err);
}
