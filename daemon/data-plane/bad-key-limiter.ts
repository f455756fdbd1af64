/** Clients tracked at most (about 150 bytes each): past it, the oldest window is dropped. */
export const MAX_CLIENTS = 100_000;

interface Window {
  start: number;
  count: number;
}

/**
 * Slows key guessing: a client that sends more than `limit` bad keys within a minute is
 * answered 429 for the rest of that minute. Valid keys are never counted or refused.
 *
 * A client is an IPv4 address or an IPv6 /64 (`clientOf`). Memory and time are bounded whatever
 * the number of clients: the windows are kept in the order they started, so the ones that ended
 * are dropped from the front as new ones come (each window is dropped once), and past
 * `maxClients` the oldest goes too. It was a scan of every window for each new client once
 * 10,000 were live, which nothing bounded: a guesser with many addresses (any IPv6 host) made
 * each of its requests cost a walk of all of them.
 */
export class BadKeyLimiter {
  /** In the order the windows started: a window renewed is moved to the end. */
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly limit: number,
    private readonly windowMs = 60_000,
    private readonly maxClients = MAX_CLIENTS,
  ) {}

  blocked(client: string, nowMs: number): boolean {
    if (this.limit === 0) return false;
    const w = this.windows.get(client);
    return w !== undefined && nowMs - w.start < this.windowMs && w.count >= this.limit;
  }

  /** Counts a bad key; true when this one blocks the client (once per window). */
  strike(client: string, nowMs: number): boolean {
    if (this.limit === 0) return false;
    let w = this.windows.get(client);
    if (w === undefined || nowMs - w.start >= this.windowMs) {
      if (w !== undefined) this.windows.delete(client);
      w = { start: nowMs, count: 0 };
      this.windows.set(client, w);
      this.prune(nowMs);
    }
    w.count++;
    return w.count === this.limit;
  }

  /** Seconds until the client's window resets. */
  retryAfterSeconds(client: string, nowMs: number): number {
    const w = this.windows.get(client);
    return w === undefined ? 0 : Math.max(1, Math.ceil((w.start + this.windowMs - nowMs) / 1000));
  }

  /** Clients tracked now (for tests). */
  get size(): number {
    return this.windows.size;
  }

  /** Drops ended windows from the front, and the oldest past `maxClients`. */
  private prune(nowMs: number): void {
    for (const [client, w] of this.windows) {
      if (nowMs - w.start < this.windowMs && this.windows.size <= this.maxClients) return;
      this.windows.delete(client);
    }
  }
}

/**
 * The client an address stands for. An IPv6 host is given a whole /64 and may send from any
 * address in it, so its addresses count as one client; an IPv4 address, or an IPv4 client of a
 * dual-stack listener (`::ffff:192.0.2.1`), counts alone.
 */
export function clientOf(address: string): string {
  if (!address.includes(':')) return address;
  const a = address.toLowerCase().split('%')[0] as string;
  if (a.startsWith('::ffff:') && a.includes('.')) return a.slice(7);
  const gap = a.indexOf('::');
  let hextets: string[];
  if (gap < 0) {
    hextets = a.split(':');
  } else {
    const head = gap === 0 ? [] : a.slice(0, gap).split(':');
    const rest = a.slice(gap + 2);
    const tail = rest === '' ? [] : rest.split(':');
    // A dotted IPv4 tail (`::192.0.2.1`) stands for two hextets.
    const tailLength = tail.length + (rest.includes('.') ? 1 : 0);
    hextets = [...head, ...new Array<string>(Math.max(0, 8 - head.length - tailLength)).fill('0'), ...tail];
  }
  return `${hextets
    .slice(0, 4)
    .map((h) => (Number.parseInt(h, 16) || 0).toString(16))
    .join(':')}::/64`;
}
