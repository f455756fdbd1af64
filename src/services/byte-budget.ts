/**
 * The request bodies a daemon holds at once, bounded per key and in all (`--body-memory-per-key`,
 * `--body-memory`). A body is held from its announced length (or from each chunk as it arrives)
 * until its exchange is over: while it is read, while it waits in an instance's queue, and while
 * the model server has it (undici keeps the body it sent until the answer is over). Without a
 * bound, one key sending bodies near --body-limit to a slow or queued instance held about 22 MiB
 * of RSS per request, as many requests as it liked: the daemon ran out of memory, and every other
 * key's streams with it.
 *
 * Counted in bytes of body, not of RSS: the daemon keeps one copy of a held body (the bytes it
 * sends upstream), and what parsing and rewriting it cost is garbage by the time it waits
 * (docs/reliability.md gives the RSS measured against this budget). Memory only, per daemon.
 */
export type ByteRefusal = 'key' | 'daemon';

export class ByteBudget {
  private total = 0;
  private readonly byKey = new Map<string, number>();

  /** `daemonMax`: every key's bodies at once; `keyMax`: one key's. */
  constructor(
    readonly daemonMax: number,
    readonly keyMax: number,
  ) {}

  /**
   * Holds `n` more bytes for `key`, or says which bound refuses them (the key's first: a key
   * over its share is told to slow down, not that the daemon is full). Nothing is held when refused.
   */
  take(key: string, n: number): ByteRefusal | null {
    if (n <= 0) return null;
    const mine = this.byKey.get(key) ?? 0;
    if (mine + n > this.keyMax) return 'key';
    if (this.total + n > this.daemonMax) return 'daemon';
    this.byKey.set(key, mine + n);
    this.total += n;
    return null;
  }

  /** Gives back `n` bytes held for `key` (once per take, by the holder). */
  give(key: string, n: number): void {
    if (n <= 0) return;
    const mine = (this.byKey.get(key) ?? 0) - n;
    if (mine > 0) this.byKey.set(key, mine);
    else this.byKey.delete(key);
    this.total = Math.max(0, this.total - n);
  }

  /** Bytes held in all. */
  get held(): number {
    return this.total;
  }

  /** Bytes held for `key`. */
  heldBy(key: string): number {
    return this.byKey.get(key) ?? 0;
  }
}
