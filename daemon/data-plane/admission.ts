/** A request waiting for a slot of its instance. */
export interface Waiter {
  readonly key: string;
  /** Its turn came: a slot is held for it until `Admission.leave`. Called on a later microtask. */
  grant(): void;
  /** It waited `queueTimeout` without a turn; it is out of the queue and holds nothing. */
  expire(): void;
  /** Set by the queue. */
  timer?: NodeJS.Timeout | undefined;
}

interface Gate {
  running: number;
  waiting: number;
  /** FIFO per key. */
  readonly byKey: Map<string, Waiter[]>;
  /** Keys with waiters, in the order their next waiter is served: round robin. */
  readonly turn: string[];
}

/**
 * Per-instance admission (`--max-concurrency`, `--queue`, `--queue-timeout`): the proxy, not the
 * model server, decides who waits. At most `max` requests of an instance are with its model
 * server at once; the rest wait in a bounded queue, served round robin between keys and in
 * order within a key, so one busy key cannot starve the others. Memory only.
 */
export class Admission {
  private readonly gates = new Map<string, Gate>();

  constructor(
    private readonly max: number,
    private readonly queueSize: number,
    private readonly timeoutMs: number,
    private readonly onDepth?: (instance: string, depth: number) => void,
  ) {}

  private gate(instance: string): Gate {
    let g = this.gates.get(instance);
    if (g === undefined) {
      g = { running: 0, waiting: 0, byKey: new Map(), turn: [] };
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
   */
  wait(instance: string, w: Waiter): 'queued' | 'full' {
    const g = this.gate(instance);
    if (g.waiting >= this.queueSize) return 'full';
    let list = g.byKey.get(w.key);
    if (list === undefined) {
      list = [];
      g.byKey.set(w.key, list);
      g.turn.push(w.key);
    }
    list.push(w);
    g.waiting++;
    w.timer = setTimeout(() => {
      if (this.remove(instance, g, w)) w.expire();
    }, this.timeoutMs);
    this.onDepth?.(instance, g.waiting);
    return 'queued';
  }

  /** The client left while queued: out of the queue. */
  cancel(instance: string, w: Waiter): void {
    const g = this.gates.get(instance);
    if (g !== undefined) this.remove(instance, g, w);
  }

  /** A request that held a slot is over: the next waiter's turn. */
  leave(instance: string): void {
    const g = this.gates.get(instance);
    if (g === undefined) return;
    if (g.running > 0) g.running--;
    if (g.waiting === 0) return;
    while (g.running < this.max && g.waiting > 0) {
      const key = g.turn.shift() as string;
      const list = g.byKey.get(key) as Waiter[];
      const w = list.shift() as Waiter;
      if (list.length > 0) g.turn.push(key);
      else g.byKey.delete(key);
      g.waiting--;
      clearTimeout(w.timer);
      g.running++;
      // Not from inside the request that just ended (its relay is still settling).
      queueMicrotask(() => w.grant());
    }
    this.onDepth?.(instance, g.waiting);
  }

  /** Waiting now, for tests and the metrics. */
  depth(instance: string): number {
    return this.gates.get(instance)?.waiting ?? 0;
  }

  private remove(instance: string, g: Gate, w: Waiter): boolean {
    const list = g.byKey.get(w.key);
    const at = list?.indexOf(w) ?? -1;
    if (list === undefined || at === -1) return false;
    list.splice(at, 1);
    if (list.length === 0) {
      g.byKey.delete(w.key);
      g.turn.splice(g.turn.indexOf(w.key), 1);
    }
    g.waiting--;
    clearTimeout(w.timer);
    this.onDepth?.(instance, g.waiting);
    return true;
  }
}
