/**
 * buildDaemon binds nothing and arms no timer; listen() binds the port and the socket; a daemon
 * that never listened leaves a socket it did not make alone at shutdown.
 */
import { lstat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { buildInproc } from '../helpers/inproc.js';

const isSocket = async (path: string): Promise<boolean> => (await lstat(path).catch(() => null))?.isSocket() === true;

it('built: both planes answer inject() with no port, no socket and no base URL; listen() binds both; shutdown removes the socket', async () => {
  const d = await buildInproc();
  try {
    const { dataPlane, management, ctx } = d.daemon;
    expect([dataPlane.server.listening, management.server.listening, ctx.baseUrl, ctx.metricsUrl]).toEqual([
      false,
      false,
      '',
      null,
    ]);
    expect(await isSocket(d.config.socket)).toBe(false);
    expect((await dataPlane.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect(d.logs.map((l) => l.msg)).not.toContain('ob-proxy serving');

    await d.daemon.listen();
    expect(ctx.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await isSocket(d.config.socket)).toBe(true);
    const health = await fetch(`${ctx.baseUrl}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    expect(d.logs.filter((l) => l.msg === 'ob-proxy serving')).toEqual([
      expect.objectContaining({ baseUrl: ctx.baseUrl, socket: d.config.socket, store: 'memory' }),
    ]);
    await expect(d.daemon.listen()).rejects.toThrow('This daemon has already listened, or is stopping.');
  } finally {
    await d.close();
  }
  expect(await isSocket(d.config.socket)).toBe(false);
});

it('a daemon that never listened does not remove the socket at its path at shutdown', async () => {
  const d = await buildInproc();
  // Another process's socket, made at that path after this daemon was built.
  const other = createServer();
  await new Promise<void>((resolve) => other.listen(d.config.socket, resolve));
  try {
    await d.daemon.shutdown(0);
    expect(await isSocket(d.config.socket)).toBe(true);
    await expect(d.daemon.listen()).rejects.toThrow('This daemon has already listened, or is stopping.');
  } finally {
    await new Promise<void>((resolve) => other.close(() => resolve()));
    await d.close();
  }
});

it('a listen() that fails closes everything: a later shutdown() has nothing left to do', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as { port: number }).port;
  const d = await buildInproc({ port });
  try {
    await expect(d.daemon.listen()).rejects.toThrow(
      `Cannot listen on 127.0.0.1:${port} (EADDRINUSE): something else holds that port.`,
    );
    expect(await isSocket(d.config.socket)).toBe(false);
    await d.daemon.shutdown(0);
    // The store was closed once, by the failed listen(): shutdown() did not run again.
    expect(d.logs.map((l) => l.msg)).not.toContain('stopped');
  } finally {
    await new Promise<void>((resolve) => taken.close(() => resolve()));
    await d.close();
  }
});
