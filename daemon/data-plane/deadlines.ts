/** A request with a response deadline (a relay): linked into the list by its own fields. */
export interface DeadlineNode {
  /** performance.now() at which the deadline passes. */
  dueAt: number;
  prevDue: DeadlineNode | null;
  nextDue: DeadlineNode | null;
  /** Called once, from the sweep, when `dueAt` has passed; the node is out of the list by then. */
  deadlinePassed(): void;
}

/**
 * The response deadlines of the requests in flight, in one list swept every `periodMs`, instead
 * of a timer per request: a Timeout (with its argument array and its place in Node's timer
 * lists) lives as long as its request, and what requests in flight keep alive is copied by
 * every scavenge they live through (docs/performance.md, session 8). Every request gets the same
 * deadline, so they come due in the order they were added: adding is an append, the sweep takes
 * from the front, and a request that ends unlinks itself. A deadline is enforced at most
 * `periodMs` late (CONTRACT §3 asks for a second). The sweep runs only while the list is not
 * empty, and keeps no process alive.
 */
export class Deadlines {
  private head: DeadlineNode | null = null;
  private tail: DeadlineNode | null = null;
  private timer: NodeJS.Timeout | null = null;

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
    for (let x = this.head; x !== null && x.dueAt <= now; x = this.head) {
      this.remove(x);
      // One request's failure to answer must not leave the others due past their deadline.
      try {
        x.deadlinePassed();
      } catch (err) {
        this.onError(err);
      }
    }
    if (this.head === null && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  };
}
