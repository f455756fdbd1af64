/**
 * The request bodies a daemon holds at once, bounded per key, per instance and in all
 * (`--body-memory-per-key`, `--body-memory-per-instance`, `--body-memory`). A body is held as its
 * bytes arrive, never from the length it announces (a client announcing lengths it never sends
 * would hold the room of every other key for nothing), until its exchange is over: while it is
 * read, while it waits in an instance's queue, and while the model server has it (undici keeps
 * the body it sent until the answer is over). Without a bound, one key sending bodies near
 * --body-limit to a slow or queued instance held about 22 MiB of RSS per request, as many
 * requests as it liked: the daemon ran out of memory, and every other key's streams with it.
 *
 * The instance's share bounds what one customer holds with any number of keys: the keys of one
 * instance leave the others at least the rest of the daemon's room.
 *
 * Counted in bytes of body, not of RSS: the daemon keeps one copy of a held body (the bytes it
 * sends upstream), and what parsing and rewriting it cost is garbage by the time it waits
 * (docs/reliability.md gives the RSS measured against this budget). Memory only, per daemon.
 */
export type ByteRefusal = 'key' | 'instance' | 'daemon';

export class ByteBudget {
  private total = 0;
  private readonly byKey = new Map<string, number>();
  private readonly byInstance = new Map<string, number>();

  /** `daemonMax`: every key's bodies at once; `instanceMax`: one instance's keys'; `keyMax`: one key's. */
  constructor(
    readonly daemonMax: number,
    readonly keyMax: number,
    readonly instanceMax = daemonMax,
  ) {}

  /**
   * Which bound `n` more bytes for `key` of `instance` would pass, as things stand (null: none),
   * holding nothing: the narrowest first (a key over its share is told to slow down, not that
   * the daemon is full).
   */
  wouldRefuse(key: string, instance: string, n: number): ByteRefusal | null {
    if (n <= 0) return null;
    if ((this.byKey.get(key) ?? 0) + n > this.keyMax) return 'key';
    // An instance whose share is the whole daemon's is told the daemon is full, as it is.
    if (this.instanceMax < this.daemonMax && (this.byInstance.get(instance) ?? 0) + n > this.instanceMax)
      return 'instance';
    if (this.total + n > this.daemonMax) return 'daemon';
    return null;
  }

  /** Holds `n` more bytes for `key` of `instance`, or says which bound refuses them; nothing is held when refused. */
  take(key: string, instance: string, n: number): ByteRefusal | null {
    const refused = this.wouldRefuse(key, instance, n);
    if (refused !== null || n <= 0) return refused;
    this.byKey.set(key, (this.byKey.get(key) ?? 0) + n);
    this.byInstance.set(instance, (this.byInstance.get(instance) ?? 0) + n);
    this.total += n;
    return null;
  }

  /** Gives back `n` bytes held for `key` of `instance` (once per take, by the holder). */
  give(key: string, instance: string, n: number): void {
    if (n <= 0) return;
    drop(this.byKey, key, n);
    drop(this.byInstance, instance, n);
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

  /** Bytes held for the keys of `instance`. */
  heldFor(instance: string): number {
    return this.byInstance.get(instance) ?? 0;
  }
}

/** Takes `n` from `id`'s count, forgetting it at zero. */
function drop(counts: Map<string, number>, id: string, n: number): void {
  const left = (counts.get(id) ?? 0) - n;
  if (left > 0) counts.set(id, left);
  else counts.delete(id);
}
