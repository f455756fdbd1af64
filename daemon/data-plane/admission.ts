/** A request waiting for a slot of its instance. */
export interface Waiter {
  readonly key: string;
  /** Its turn came: a slot is held for it until `Admission.leave`. Called on a later microtask. */
  grant(): void;
  /** It waited `queueTimeout` without a turn; it is out of the queue and holds nothing. */
  expire(): void;
  /**
   * The queue was full and a key holding less than its share needed the place: this, the newest
   * waiter of the key holding the most, is out of the queue and holds nothing (answer it as a
   * full queue would). Called before `wait` returns for the newcomer.
   */
  evict(): void;
}

/** How the queue times its waiters: Node's timers, or a test's clock. */
export interface QueueTimers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const NODE_TIMERS: QueueTimers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface Entry {
  readonly w: Waiter;
  /** Arrival order in its instance's queue: among keys holding as many places, the newest waiter is evicted. */
  readonly seq: number;
  timer: unknown;
}

interface Gate {
  running: number;
  waiting: number;
  seq: number;
  /** FIFO per key. */
  readonly byKey: Map<string, Entry[]>;
  /** Keys with waiters, in the order their next waiter is served: round robin. */
  readonly turn: string[];
}

/**
 * Per-instance admission (`--max-concurrency`, `--queue`, `--queue-timeout`): the proxy, not the
 * model server, decides who waits. At most `max` requests of an instance are with its model
 * server at once; the rest wait in a bounded queue, served round robin between keys and in
 * order within a key, so one busy key cannot starve the others. Its places are shared fairly
 * too: a key that filled the queue gives up its newest place to a key holding less than its
 * share (`wait`). Memory only.
 */
export class Admission {
  private readonly gates = new Map<string, Gate>();

  constructor(
    private readonly max: number,
    private readonly queueSize: number,
    private readonly timeoutMs: number,
    private readonly onDepth?: (instance: string, depth: number) => void,
    private readonly timers: QueueTimers = NODE_TIMERS,
  ) {}

  private gate(instance: string): Gate {
    let g = this.gates.get(instance);
    if (g === undefined) {
      g = { running: 0, waiting: 0, seq: 0, byKey: new Map(), turn: [] };
      this.gates.set(instance, g);
    }
    return g;
  }

  /** Takes a slot if one is free and nobody waits: call `leave` once when the request is over. */
  take(instance: string): boolean {
    const g = this.gate(instance);
    if (g.running >= this.max || g.waiting > 0) return false;
    g.running++;
    return true;
  }

  /**
   * After `take` failed: 'queued', and `w.grant` or `w.expire` follows unless `cancel` comes
   * first; or 'full', nothing held: refuse it.
   *
   * A full queue takes a newcomer only when its key holds less than its fair share of the places
   * (the queue's size over the keys waiting, the newcomer's counted): the newest waiter of the key
   * holding the most is evicted for it. Without this, one key that filled the queue would have
   * every other key refused for as long as it kept it full; with it, a key flooding the queue
   * loses its latest arrivals, which have waited least.
   */
  wait(instance: string, w: Waiter): 'queued' | 'full' {
    const g = this.gate(instance);
    if (g.waiting >= this.queueSize) {
      const victim = this.victim(g, w.key);
      if (victim === null) return 'full';
      this.remove(instance, g, victim);
      victim.w.evict();
    }
    let list = g.byKey.get(w.key);
    if (list === undefined) {
      list = [];
      g.byKey.set(w.key, list);
      g.turn.push(w.key);
    }
    const e: Entry = { w, seq: g.seq++, timer: undefined };
    e.timer = this.timers.set(() => {
      if (this.remove(instance, g, e)) w.expire();
    }, this.timeoutMs);
    list.push(e);
    g.waiting++;
    this.onDepth?.(instance, g.waiting);
    return 'queued';
  }

  /** The client left while queued: out of the queue. */
  cancel(instance: string, w: Waiter): void {
    const g = this.gates.get(instance);
    const e = g?.byKey.get(w.key)?.find((x) => x.w === w);
    if (g !== undefined && e !== undefined) this.remove(instance, g, e);
  }

  /** A request that held a slot is over: the next waiter's turn. */
  leave(instance: string): void {
    const g = this.gates.get(instance);
    if (g === undefined) return;
    if (g.running > 0) g.running--;
    if (g.waiting === 0) return;
    while (g.running < this.max && g.waiting > 0) {
      const key = g.turn.shift() as string;
      const list = g.byKey.get(key) as Entry[];
      const e = list.shift() as Entry;
      if (list.length > 0) g.turn.push(key);
      else g.byKey.delete(key);
      g.waiting--;
      this.timers.clear(e.timer);
      g.running++;
      // Not from inside the request that just ended (its relay is still settling).
      queueMicrotask(() => e.w.grant());
    }
    this.onDepth?.(instance, g.waiting);
  }

  /** Waiting now, for tests and the metrics. */
  depth(instance: string): number {
    return this.gates.get(instance)?.waiting ?? 0;
  }

  /**
   * The waiter a newcomer of `key` takes the place of in a full queue, or null when `key` holds
   * its fair share already. Some other key then holds more than the share, so the victim is
   * never the newcomer's own.
   */
  private victim(g: Gate, key: string): Entry | null {
    const held = g.byKey.get(key)?.length ?? 0;
    const keys = g.byKey.size + (held === 0 ? 1 : 0);
    // held < queueSize / keys, in integers.
    if (held * keys >= this.queueSize) return null;
    let victim: Entry | null = null;
    let most = 0;
    for (const list of g.byKey.values()) {
      const newest = list[list.length - 1] as Entry;
      if (list.length > most || (list.length === most && victim !== null && newest.seq > victim.seq)) {
        most = list.length;
        victim = newest;
      }
    }
    return victim;
  }

  private remove(instance: string, g: Gate, e: Entry): boolean {
    const key = e.w.key;
    const list = g.byKey.get(key);
    const at = list?.indexOf(e) ?? -1;
    if (list === undefined || at === -1) return false;
    list.splice(at, 1);
    if (list.length === 0) {
      g.byKey.delete(key);
      g.turn.splice(g.turn.indexOf(key), 1);
    }
    g.waiting--;
    this.timers.clear(e.timer);
    this.onDepth?.(instance, g.waiting);
    return true;
  }
}
