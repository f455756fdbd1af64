/**
 * daemon/shutdown.ts alone: the order of the daemon's end (drain, connections, spans, usage, the
 * store, the listeners, the lock), the grace period, the failures it reports, and the shutdown
 * after a failed listen(). Every part is a fake that writes what happened to it in `order`; the
 * timers and performance.now() are Vitest's fake ones.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Shutdown, type ShutdownDeps } from '../../daemon/shutdown.js';
import type { UsageLost } from '../../daemon/usage-flusher.js';
import { recordingLog } from '../helpers/recording-log.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

interface Options {
  /** When the last exchange ends by itself (0: none in flight); never: only when its connection is closed. */
  drainedAfterMs?: number;
  lost?: UsageLost | null;
  unwritten?: Error;
  storeCloseFails?: Error;
}

function daemon(o: Options = {}) {
  const order: string[] = [];
  const step = (name: string) => (): Promise<void> => {
    order.push(name);
    return Promise.resolve();
  };
  const { log, lines } = recordingLog();
  let idleSweeps = 0;
  let endExchanges!: () => void;
  const drained = new Promise<void>((resolve) => (endExchanges = resolve));
  if (o.drainedAfterMs === 0) endExchanges();
  else if (o.drainedAfterMs !== undefined) setTimeout(() => endExchanges(), o.drainedAfterMs);
  const ctx = {
    draining: false,
    upstream: { close: step('upstream closed'), destroy: step('upstream aborted') },
    tracing: { stop: (ms: number) => step(`spans sent within ${ms} ms`)() },
  };
  const deps = {
    ctx,
    log,
    dataPlane: {
      close: () => {
        order.push(`public port closed, draining ${ctx.draining}`);
        return drained.then(() => order.push('exchanges over'));
      },
      server: {
        closeIdleConnections: () => idleSweeps++,
        closeAllConnections: () => {
          order.push('connections closed');
          endExchanges();
        },
      },
    },
    management: {
      close: step('management closed'),
      server: { closeAllConnections: () => order.push('management connections closed') },
    },
    running: ['pack timer', 'usage flusher'].map((name) => ({ stop: () => order.push(`${name} stopped`) })),
    stopFollowing: () => order.push('lifecycle unfollowed'),
    stopWatching: () => order.push('revocations unwatched'),
    usage: { final: () => step('usage written')().then(() => o.lost ?? null) },
    lifecycle: {
      close: () =>
        step('lifecycle closed')().then(() => (o.unwritten === undefined ? undefined : Promise.reject(o.unwritten))),
    },
    store: {
      close: () =>
        step('store closed')().then(() =>
          o.storeCloseFails === undefined ? undefined : Promise.reject(o.storeCloseFails),
        ),
    },
    probe: { close: step('probes closed') },
    listeners: { closeMetrics: step('metrics closed'), removeSocket: step('socket removed') },
    lock: { release: step('lock released') },
  } as unknown as ShutdownDeps;
  return { order, lines, ctx, idleSweeps: () => idleSweeps, shutdown: new Shutdown(deps) };
}

/** What follows the drain when everything can be written. */
const AFTER_SPANS = [
  'revocations unwatched',
  'usage written',
  'lifecycle closed',
  'store closed',
  'metrics closed',
  'probes closed',
  'management connections closed',
  'management closed',
  'socket removed',
  'lock released',
];

describe('Shutdown.run', () => {
  it('drained within the grace period: the upstream pools close, the spans get what is left of it, then "stopped"', async () => {
    const d = daemon({ drainedAfterMs: 300 });
    const done = d.shutdown.run(10_000);
    await vi.advanceTimersByTimeAsync(300);
    await done;
    expect(d.order).toEqual([
      'pack timer stopped',
      'usage flusher stopped',
      'lifecycle unfollowed',
      'public port closed, draining true',
      'exchanges over',
      'upstream closed',
      'spans sent within 9700 ms',
      ...AFTER_SPANS,
    ]);
    expect(d.lines).toEqual([
      { level: 'info', msg: 'draining: no new requests, in-flight ones may finish', obj: { graceMs: 10_000 } },
      { level: 'info', msg: 'stopped' },
    ]);
    // Idle keep-alive connections are closed as the drain goes, every 50 ms, and no longer after.
    expect(d.idleSweeps()).toBe(5);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('the grace period over: the connections left are closed and their upstream requests aborted', async () => {
    const d = daemon();
    const done = d.shutdown.run(2_000);
    await vi.advanceTimersByTimeAsync(1_999);
    expect(d.order.at(-1)).toBe('public port closed, draining true');
    await vi.advanceTimersByTimeAsync(1);
    await done;
    expect(d.order.slice(4)).toEqual([
      'connections closed',
      'upstream aborted',
      'exchanges over',
      // At least a second for the spans, however little of the grace period is left.
      'spans sent within 1000 ms',
      ...AFTER_SPANS,
    ]);
    expect(d.lines.map((l) => [l.level, l.msg])).toEqual([
      ['info', 'draining: no new requests, in-flight ones may finish'],
      ['warn', 'grace period over: closing remaining connections'],
      ['info', 'stopped'],
    ]);
  });

  it('once: a second call is the first one', async () => {
    const d = daemon({ drainedAfterMs: 0 });
    const first = d.shutdown.run(1_000);
    expect(d.shutdown.begun).toBe(true);
    expect(d.shutdown.run(0)).toBe(first);
    await vi.advanceTimersByTimeAsync(0);
    await first;
    expect(d.lines.filter((l) => l.msg === 'stopped')).toHaveLength(1);
  });

  it('usage that cannot be written: everything is closed all the same, then the loss is logged and thrown', async () => {
    const d = daemon({ drainedAfterMs: 0, lost: { err: new Error('database down'), keys: 3 } });
    const done = d.shutdown.run(1_000);
    const thrown = done.catch((err: unknown) => err);
    await vi.advanceTimersByTimeAsync(0);
    const message =
      'The store could not be written at shutdown (database down) Usage counters of 3 key(s) since the last flush were not written.';
    expect(((await thrown) as Error).message).toBe(message);
    expect(d.order.slice(-AFTER_SPANS.length)).toEqual(AFTER_SPANS);
    expect(d.lines.at(-1)).toEqual({ level: 'error', msg: message, obj: { unwritten: undefined } });
    expect(d.lines.map((l) => l.msg)).not.toContain('stopped');
  });

  it('revocations unwritten too: the lifecycle says what, and the usage note is added to it', async () => {
    const unwritten = Object.assign(new Error('2 revocations were not written.'), { unwritten: ['k1', 'k2'] });
    const d = daemon({ drainedAfterMs: 0, unwritten, lost: { err: new Error('database down'), keys: 1 } });
    const thrown = d.shutdown.run(1_000).catch((err: unknown) => err);
    await vi.advanceTimersByTimeAsync(0);
    const message = '2 revocations were not written. Usage counters of 1 key(s) since the last flush were not written.';
    expect(await thrown).toBe(unwritten);
    expect(unwritten.message).toBe(message);
    expect(d.lines.at(-1)).toEqual({ level: 'error', msg: message, obj: { unwritten: ['k1', 'k2'] } });
  });

  it('a store that fails to close: reported when nothing else was', async () => {
    const d = daemon({ drainedAfterMs: 0, storeCloseFails: new Error('pool end failed') });
    const thrown = d.shutdown.run(1_000).catch((err: unknown) => err);
    await vi.advanceTimersByTimeAsync(0);
    expect(((await thrown) as Error).message).toBe('pool end failed');
    expect(d.order.slice(-AFTER_SPANS.length)).toEqual(AFTER_SPANS);
  });
});

describe('Shutdown.abandon', () => {
  it('after a failed listen(): everything closed at once, nothing drained or written, and run() has nothing left to do', async () => {
    const d = daemon({ drainedAfterMs: 0 });
    await d.shutdown.abandon();
    expect(d.order).toEqual([
      'revocations unwatched',
      'pack timer stopped',
      'usage flusher stopped',
      'probes closed',
      'metrics closed',
      'lifecycle unfollowed',
      'public port closed, draining false',
      'exchanges over',
      'spans sent within 1000 ms',
      'socket removed',
      'store closed',
      'lock released',
    ]);
    await d.shutdown.run(1_000);
    expect(d.order).toHaveLength(12);
    expect(d.lines).toEqual([]);
  });
});
