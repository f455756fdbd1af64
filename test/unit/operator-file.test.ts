/**
 * The reader of files the operator names (daemon/operator-file.ts) and the SIGHUP reload built
 * on it (daemon/tls-reload.ts): what is refused, the cap held while reading, and the time bound.
 * A call that never returns (a mount that does not answer) is an `open` that never settles; the
 * timers are Vitest's fake ones, so nothing here waits in real time.
 */
import { execFileSync } from 'node:child_process';
import { open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { OperatorFileError, OperatorFileReader } from '../../daemon/operator-file.js';
import { TlsReloader } from '../../daemon/tls-reload.js';
import type { TlsFiles } from '../../daemon/tls.js';
import { tmpHome } from '../helpers/processes.js';

async function refusal(p: Promise<unknown>): Promise<{ problem: string; reason: string }> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OperatorFileError);
  const { problem, reason } = err as OperatorFileError;
  return { problem, reason };
}

describe('what is read', () => {
  const reader = new OperatorFileReader();

  it('a regular file, whole', async () => {
    const dir = await tmpHome();
    await writeFile(join(dir, 'f'), 'token\n');
    expect((await reader.read(join(dir, 'f'), { cap: 6 })).toString()).toBe('token\n');
  });

  it('refuses a FIFO, a device, a folder and a socket without reading them', async () => {
    const dir = await tmpHome();
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    expect(await refusal(reader.read(join(dir, 'fifo'), { cap: 10 }))).toEqual({
      problem: 'not-a-file',
      reason: 'is a named pipe (FIFO), not a regular file',
    });
    expect(await refusal(reader.read('/dev/zero', { cap: 10 }))).toEqual({
      problem: 'not-a-file',
      reason: 'is a character device, not a regular file',
    });
    expect(await refusal(reader.read(dir, { cap: 10 }))).toEqual({
      problem: 'not-a-file',
      reason: 'is a folder, not a regular file',
    });
    const { createServer } = await import('node:net');
    const server = createServer();
    await new Promise<void>((r) => server.listen(join(dir, 'sock'), r));
    expect(await refusal(reader.read(join(dir, 'sock'), { cap: 10 }))).toEqual({
      problem: 'not-a-file',
      reason: 'is a socket or a device with nothing behind it, not a regular file',
    });
    server.close();
    expect(await refusal(reader.read(join(dir, 'missing'), { cap: 10 }))).toEqual({
      problem: 'unreadable',
      reason: 'cannot be read (ENOENT)',
    });
  });

  it('holds the cap while reading: a file whose size says 0 (as /proc files do) is read no further than cap + 1', async () => {
    expect(await refusal(reader.read('/proc/self/maps', { cap: 16 }))).toEqual({
      problem: 'too-large',
      reason: 'is larger than 16 bytes',
    });
  });
});

describe('a read that does not return', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is reported after the timeout, holds the gate until it returns, and no second read starts meanwhile', async () => {
    const dir = await tmpHome();
    await writeFile(join(dir, 'ok'), 'fine');
    let t = 0;
    let hang: ((fh: Awaited<ReturnType<typeof open>>) => void) | null = null;
    const opened: string[] = [];
    const reader = new OperatorFileReader(
      5_000,
      {
        open: (path, flags) => {
          opened.push(path);
          if (path === '/hung/cert.pem') return new Promise((r) => (hang = r));
          return open(path, flags);
        },
      },
      () => t,
    );

    const stuck = reader.read('/hung/cert.pem', { cap: 100 });
    const waiting = reader.read(join(dir, 'ok'), { cap: 100 });
    const both = Promise.allSettled([stuck, waiting]);
    await vi.advanceTimersByTimeAsync(0);
    t = 5_000;
    await vi.advanceTimersByTimeAsync(5_000);
    const [s, w] = await both;
    expect((s as PromiseRejectedResult).reason).toMatchObject({
      problem: 'no-answer',
      reason: 'did not answer within 5 s (is it on a mount that does not answer?)',
    });
    expect((w as PromiseRejectedResult).reason).toMatchObject({
      problem: 'busy',
      reason:
        'was not read: the read of /hung/cert.pem, begun 5 s ago, has not returned (is it on a mount that does not answer?). Files named to ob-proxy are read one at a time; fix that path, or restart the daemon',
    });

    // Past its time, the stuck read refuses new ones at once, with no timer to wait on.
    t = 12_000;
    expect(await refusal(reader.read(join(dir, 'ok'), { cap: 100 }))).toMatchObject({ problem: 'busy' });
    expect(opened).toEqual(['/hung/cert.pem']);

    // The call returns at last: its handle is closed, and reads go on.
    // (its fstat, read and close are real calls: polled until they are done)
    hang!(await open(join(dir, 'ok'), 'r'));
    vi.useRealTimers();
    await vi.waitFor(async () => expect((await reader.read(join(dir, 'ok'), { cap: 100 })).toString()).toBe('fine'));
    expect(opened).toEqual(['/hung/cert.pem', join(dir, 'ok')]);
  });
});

describe('SIGHUP reloads', () => {
  function deferred(): { promise: Promise<TlsFiles>; resolve: () => void; reject: (e: Error) => void } {
    let resolve!: () => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<TlsFiles>((res, rej) => {
      resolve = () => res({ cert: Buffer.from('c'), key: Buffer.from('k') });
      reject = rej;
    });
    return { promise, resolve, reject };
  }

  it('one at a time: signals during a reload are folded into one more, started when it ends', async () => {
    const loads: ReturnType<typeof deferred>[] = [];
    const lines: string[] = [];
    const log = {
      info: (_o: object, msg: string) => lines.push(`info ${msg}`),
      warn: (_o: object, msg: string) => lines.push(`warn ${msg}`),
      error: (o: { err?: string }, msg: string) => lines.push(`error ${msg}: ${o.err}`),
    };
    let applied = 0;
    const r = new TlsReloader(
      { cert: '/c', key: '/k' },
      () => {
        const d = deferred();
        loads.push(d);
        return d.promise;
      },
      () => applied++,
      log as never,
    );
    const first = r.reload();
    const second = r.reload();
    const third = r.reload();
    expect(loads).toHaveLength(1);
    expect(lines).toEqual([
      'warn TLS reload already under way: one more starts when it ends',
      'warn TLS reload already under way, and one more is pending: this SIGHUP is folded into it',
    ]);

    loads[0]!.reject(new Error('--tls-cert /c did not answer within 5 s'));
    expect(await first).toBe(false);
    await vi.waitFor(() => expect(loads).toHaveLength(2));
    loads[1]!.resolve();
    expect(await second).toBe(true);
    expect(await third).toBe(true);
    expect(loads).toHaveLength(2);
    expect(applied).toBe(1);
    expect(lines.slice(2)).toEqual([
      'error TLS reload failed: still serving the previous certificate: --tls-cert /c did not answer within 5 s',
      'info TLS certificate reloaded: new connections get it, open ones keep theirs',
    ]);

    // Idle again: the next signal starts at once.
    const fourth = r.reload();
    expect(loads).toHaveLength(3);
    loads[2]!.resolve();
    expect(await fourth).toBe(true);
  });
});
