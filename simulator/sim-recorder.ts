/**
 * Bounded recording of the requests the simulator received (a ring buffer), the counters, and
 * `waitFor` waiters that are re-checked whenever a record changes (no polling).
 */
import type { RecordedRequest, SimulatorStats } from './sim-types.js';

interface Waiter {
  readonly predicate: (r: RecordedRequest) => boolean;
  readonly resolve: (r: RecordedRequest) => void;
  readonly reject: (e: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class Recorder {
  private ring: RecordedRequest[] = [];
  private head = 0; // index of the oldest record once the ring is full
  private seq = 0;
  private readonly waiters = new Set<Waiter>();
  readonly counters: SimulatorStats = { received: 0, inFlight: 0, aborted: 0, completed: 0 };

  constructor(private limit: number) {}

  /** A new record for an arriving request; counted as received and in flight. */
  begin(method: string, path: string, headers: RecordedRequest['headers']): RecordedRequest {
    const r: RecordedRequest = {
      seq: ++this.seq,
      method,
      path,
      headers,
      body: null,
      startedAt: Date.now(),
      endedAt: null,
      aborted: false,
      completed: false,
      chunksSent: 0,
    };
    this.counters.received++;
    this.counters.inFlight++;
    if (this.limit > 0) {
      if (this.ring.length < this.limit) this.ring.push(r);
      else {
        this.ring[this.head] = r;
        this.head = (this.head + 1) % this.limit;
      }
    }
    return r;
  }

  /** The response ended (finished, aborted by the client, or cut by the simulator itself). */
  end(r: RecordedRequest, outcome: 'completed' | 'aborted' | 'cut'): void {
    r.endedAt = Date.now();
    this.counters.inFlight--;
    if (outcome === 'completed') {
      r.completed = true;
      this.counters.completed++;
    } else if (outcome === 'aborted') {
      r.aborted = true;
      this.counters.aborted++;
    }
    this.changed(r);
  }

  /** Re-checks the waiters against a record that changed. */
  changed(r: RecordedRequest): void {
    if (this.waiters.size === 0) return;
    for (const w of this.waiters) this.test(w, r);
  }

  list(): RecordedRequest[] {
    return this.head === 0 ? this.ring.slice() : [...this.ring.slice(this.head), ...this.ring.slice(0, this.head)];
  }

  clear(): number {
    const n = this.ring.length;
    this.ring = [];
    this.head = 0;
    return n;
  }

  resize(limit: number): void {
    const kept = limit === 0 ? [] : this.list().slice(-limit);
    this.limit = limit;
    this.ring = kept;
    this.head = 0;
  }

  waitFor(predicate: (r: RecordedRequest) => boolean, timeoutMs: number): Promise<RecordedRequest> {
    return new Promise<RecordedRequest>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`waitFor: no matching request within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter: Waiter = { predicate, resolve, reject, timer };
      this.waiters.add(waiter);
      for (const r of this.list()) {
        if (!this.waiters.has(waiter)) break;
        this.test(waiter, r);
      }
    });
  }

  /** Rejects every pending waiter (the simulator is closing). */
  rejectWaiters(reason: string): void {
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(new Error(reason));
    }
    this.waiters.clear();
  }

  private test(w: Waiter, r: RecordedRequest): void {
    let hit: boolean;
    try {
      hit = w.predicate(r);
    } catch (e) {
      this.waiters.delete(w);
      clearTimeout(w.timer);
      w.reject(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    if (hit) {
      this.waiters.delete(w);
      clearTimeout(w.timer);
      w.resolve(r);
    }
  }
}
