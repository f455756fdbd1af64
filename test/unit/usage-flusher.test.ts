/**
 * daemon/usage-flusher.ts alone: a flush once a period, one at a time; a failed one puts its
 * counters back and says so; the shutdown's final flush also writes what a flush still being
 * written puts back, or reports it lost. The store is a fake whose writes the test settles.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { UsageFlusher } from '../../daemon/usage-flusher.js';
import type { UsageDelta } from '../../src/store/store.js';
import { recordingLog } from '../helpers/recording-log.js';

const delta = (keyId: string): UsageDelta => ({ keyId }) as UsageDelta;

/** What the request path counted and not yet taken. */
class Counted {
  dirty: UsageDelta[] = [];
  takeDirty(): UsageDelta[] {
    const out = this.dirty;
    this.dirty = [];
    return out;
  }
  restore(deltas: UsageDelta[]): void {
    this.dirty.push(...deltas);
  }
}

/** Each write waits until the test settles it: `written` holds what was written. */
class Writes {
  written: string[][] = [];
  pending: { keys: string[]; settle: (err?: Error) => void }[] = [];
  retries = 0;
  hold = false;
  failWith: Error | null = null;
  flushUsage(dirty: Iterable<UsageDelta>): Promise<void> {
    const keys = [...dirty].map((d) => d.keyId);
    if (keys.length === 0) return Promise.resolve();
    if (this.failWith !== null) return Promise.reject(this.failWith);
    if (!this.hold) {
      this.written.push(keys);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      this.pending.push({
        keys,
        settle: (err) => {
          if (err === undefined) {
            this.written.push(keys);
            resolve();
          } else reject(err);
        },
      });
    });
  }
  retryUnwritten(): Promise<void> {
    this.retries++;
    return Promise.resolve();
  }
}

function flusher(shared = false) {
  const usage = new Counted();
  const writes = new Writes();
  const { log, lines } = recordingLog();
  const store = shared ? { subscribe: () => () => {} } : {};
  const f = new UsageFlusher({ usage, lifecycle: writes, store, periodMs: 1_000, log });
  return { usage, writes, lines, f };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('UsageFlusher', () => {
  it('writes what was counted once a period, nothing before start() nor after stop()', async () => {
    const { usage, writes, f } = flusher();
    usage.dirty.push(delta('k1'));
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes.written).toEqual([]);
    f.start();
    await vi.advanceTimersByTimeAsync(999);
    expect(writes.written).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(writes.written).toEqual([['k1']]);
    usage.dirty.push(delta('k2'), delta('k3'));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(writes.written).toEqual([['k1'], ['k2', 'k3']]);
    f.stop();
    usage.dirty.push(delta('k4'));
    await vi.advanceTimersByTimeAsync(5_000);
    expect(writes.written).toEqual([['k1'], ['k2', 'k3']]);
    expect(writes.retries).toBe(0);
  });

  it('a shared store: unwritten revocations are retried on the same period', async () => {
    const { writes, f } = flusher(true);
    f.start();
    await vi.advanceTimersByTimeAsync(3_000);
    expect(writes.retries).toBe(3);
    f.stop();
  });

  it('a failed flush puts its counters back, says so, and the next one writes them', async () => {
    const { usage, writes, lines, f } = flusher();
    usage.dirty.push(delta('k1'));
    writes.failWith = new Error('database down');
    await f.flush();
    expect(lines).toEqual([{ level: 'warn', msg: 'usage flush failed; will retry', obj: { err: 'database down' } }]);
    expect(usage.dirty.map((d) => d.keyId)).toEqual(['k1']);
    writes.failWith = null;
    usage.dirty.push(delta('k2'));
    await f.flush();
    expect(writes.written).toEqual([['k1', 'k2']]);
  });

  it('one flush at a time: a flush asked for while one is written is that one', async () => {
    const { usage, writes, f } = flusher();
    writes.hold = true;
    usage.dirty.push(delta('k1'));
    const first = f.flush();
    await vi.advanceTimersByTimeAsync(0);
    usage.dirty.push(delta('k2'));
    expect(f.flush()).toBe(first);
    expect(writes.pending.map((p) => p.keys)).toEqual([['k1']]);
    writes.pending[0]!.settle();
    await first;
    writes.hold = false;
    await f.flush();
    expect(writes.written).toEqual([['k1'], ['k2']]);
  });
});

describe('UsageFlusher.final', () => {
  it('writes what is left, and what a flush still being written puts back when it fails', async () => {
    const { usage, writes, f } = flusher();
    writes.hold = true;
    usage.dirty.push(delta('k1'));
    void f.flush();
    await vi.advanceTimersByTimeAsync(0);
    usage.dirty.push(delta('k2'));
    writes.hold = false;
    const final = f.final();
    await vi.advanceTimersByTimeAsync(0);
    // The shutdown's own write is done; it waits for the periodic one, which fails.
    expect(writes.written).toEqual([['k2']]);
    writes.pending[0]!.settle(new Error('pool ended'));
    expect(await final).toBeNull();
    expect(writes.written).toEqual([['k2'], ['k1']]);
  });

  it('a store that cannot be written: what was lost, for the shutdown to report', async () => {
    const { usage, writes, f } = flusher();
    const down = new Error('database down');
    writes.failWith = down;
    usage.dirty.push(delta('k1'), delta('k2'));
    expect(await f.final()).toEqual({ err: down, keys: 2 });
    expect(writes.written).toEqual([]);
  });

  it('nothing counted: nothing written, nothing lost', async () => {
    const { writes, f } = flusher();
    expect(await f.final()).toBeNull();
    expect(writes.written).toEqual([]);
  });
});

describe('UsageFlusher with a clock: what one flush takes is counted in one hour', () => {
  it('flushes at every hour start too, naming the hour that ends', async () => {
    const T = Date.parse('2026-11-23T12:59:58.000Z');
    vi.setSystemTime(T);
    const clock = { now: () => Date.now() };
    const taken: (string | undefined)[] = [];
    const usage = {
      dirty: [] as UsageDelta[],
      takeDirty(hour?: string): UsageDelta[] {
        taken.push(hour);
        const out = this.dirty;
        this.dirty = [];
        return out;
      },
      restore(): void {},
    };
    const writes = new Writes();
    const { log } = recordingLog();
    const f = new UsageFlusher({ usage, lifecycle: writes, store: {}, clock, periodMs: 5_000, log });
    f.start();
    usage.dirty.push(delta('k1'));
    // The hour ends in 2 s, before the 5 s period: the flush comes then, for 12:00.
    await vi.advanceTimersByTimeAsync(2_000);
    expect(taken).toEqual(['2026-11-23T12:00:00.000Z']);
    expect(writes.written).toEqual([['k1']]);
    usage.dirty.push(delta('k2'));
    await vi.advanceTimersByTimeAsync(5_000);
    expect(taken).toEqual(['2026-11-23T12:00:00.000Z', '2026-11-23T13:00:00.000Z']);
    f.stop();
  });
});
