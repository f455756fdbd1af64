/** A request with a response deadline (a relay): linked into the list by its own fields. */
export interface DeadlineNode {
  /** performance.now() at which the deadline passes. */
  dueAt: number;
  prevDue: DeadlineNode | null;
  nextDue: DeadlineNode | null;
  /** Bumped by the node at each sign of life from the model server (its headers, each read). */
  heard: number;
  /** How long the model server may now stay silent, in ms; 0: not watched (not sent yet, or paused). */
  quietMs: number;
  /** The sweep's own: `heard` as it last saw it, and when it saw it change. */
  heardSeen: number;
  quietSince: number;
  /** Called once, from the sweep, when `dueAt` has passed; the node is out of the list by then. */
  deadlinePassed(): void;
  /** Called once, from the sweep, when the model server was silent `quietMs`; the node is out of the list by then. */
  silencePassed(): void;
}

/**
 * The response deadlines of the requests in flight, and the model server's silences, in one
 * list swept every `periodMs`, instead of timers per request: a Timeout (with its argument array
 * and its place in Node's timer lists) lives as long as its request, and what requests in flight
 * keep alive is copied by every scavenge they live through (docs/performance.md, "What each optimisation bought").
 * undici's own time-outs to the headers and between reads were no better: each request made one
 * of its timer objects, held in undici's list until its next half-second tick, so promoted to
 * the old generation every time, about 100 of the 130 bytes a request promoted.
 *
 * Every request gets the same deadline, so they come due in the order they were added: adding is
 * an append, and a request that ends unlinks itself. A silence is seen without a clock read per
 * read: the node counts what it hears, and the sweep notes when the count last moved. A deadline
 * is enforced at most `periodMs` late, a silence at most twice that (docs/contract.md §3 asks for a
 * second). The sweep runs only while the list is not empty, and keeps no process alive.
 *
 * A sweep that comes more than two periods after the last one found the event loop stalled (a
 * long collection, a starved CPU): the reads that arrived meanwhile are still waiting behind this
 * timer, so no silence is judged on it; the next sweep, after they are read, judges.
 */
export class Deadlines {
  private head: DeadlineNode | null = null;
  private tail: DeadlineNode | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** When the sweep last ran (or the list last became non-empty). */
  private lastSweep = 0;

  constructor(
    private readonly periodMs = 250,
    /** A `deadlinePassed` that threw (the daemon logs it); the sweep goes on with the next. */
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  add(node: DeadlineNode, afterMs: number): void {
    node.dueAt = performance.now() + afterMs;
    // From the back: with one deadline for all, the new node is last; a shorter one walks forward.
    let before = this.tail;
    while (before !== null && before.dueAt > node.dueAt) before = before.prevDue;
    node.prevDue = before;
    node.nextDue = before === null ? this.head : before.nextDue;
    if (node.nextDue === null) this.tail = node;
    else node.nextDue.prevDue = node;
    if (before === null) this.head = node;
    else before.nextDue = node;
    if (this.timer === null) {
      this.lastSweep = performance.now();
      this.timer = setInterval(this.sweep, this.periodMs);
      this.timer.unref();
    }
  }

  /** Out of the list, its links cleared (so a node promoted and dead keeps no live one alive); again: nothing. */
  remove(node: DeadlineNode): void {
    const { prevDue, nextDue } = node;
    if (prevDue === null && this.head !== node) return;
    if (prevDue === null) this.head = nextDue;
    else prevDue.nextDue = nextDue;
    if (nextDue === null) this.tail = prevDue;
    else nextDue.prevDue = prevDue;
    node.prevDue = null;
    node.nextDue = null;
  }

  /** Requests in the list; for tests. */
  get size(): number {
    let n = 0;
    for (let x = this.head; x !== null; x = x.nextDue) n++;
    return n;
  }

  private readonly sweep = (): void => {
    const now = performance.now();
    const stalled = now - this.lastSweep > 2 * this.periodMs;
    this.lastSweep = now;
    // All of them, for their silences: a few thousand at most (one per request in flight).
    for (let x = this.head; x !== null;) {
      const next = x.nextDue;
      if (x.dueAt <= now) this.end(x, false);
      else if (x.heard !== x.heardSeen) {
        x.heardSeen = x.heard;
        x.quietSince = now;
      } else if (!stalled && x.quietMs > 0 && now - x.quietSince >= x.quietMs) this.end(x, true);
      x = next;
    }
    if (this.head === null && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  };

  private end(x: DeadlineNode, silence: boolean): void {
    this.remove(x);
    // One request's failure to answer must not leave the others due past their deadline.
    try {
      if (silence) x.silencePassed();
      else x.deadlinePassed();
    } catch (err) {
      this.onError(err);
    }
  }
}
