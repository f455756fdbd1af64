/**
 * Regression: a --home (or --socket) deep enough that the socket's path passed the 107 bytes a
 * Unix socket's path may have. Node cut the path short without a word and bound what was left:
 * the daemon put its management socket beside the home, in the folder above it (with the
 * default umask, outside the private home whose mode the daemon checks), then stopped on a bare
 * "ENOENT: no such file or directory, chmod '…/ob-proxy.sock'", leaving that stray socket behind;
 * the CLI said the daemon refused the connection. Now both say the path is too long, by how
 * much, and what to give instead; the daemon exits 1 and binds nothing.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { runCli, startServe, tmpHome } from '../../helpers/processes.js';

it('refuses a socket path longer than a Unix socket takes, and binds nothing', async () => {
  const parent = await tmpHome();
  const home = join(parent, 'h'.repeat(110));
  const socket = join(home, 'ob-proxy.sock');
  const message =
    `The socket path ${socket} is ${Buffer.byteLength(socket)} bytes long; a Unix socket's path may be at most 107. ` +
    'Give --socket (or OB_PROXY_SOCKET) a shorter path (e.g. /run/ob-proxy/ob-proxy.sock), or a shorter --home.';

  const serve = await runCli(['serve', '--port', '0'], { home });
  expect([serve.code, serve.stdout, serve.stderr]).toEqual([1, '', `error: ${message}\n`]);
  // No socket anywhere: neither in the home nor, cut short, beside it.
  expect(await readdir(parent)).toEqual(['h'.repeat(110)]);
  expect((await readdir(home)).filter((f) => f.includes('sock'))).toEqual([]);

  const cli = await runCli(['keys', 'list'], { home });
  expect([cli.code, cli.stdout, cli.stderr]).toEqual([3, '', `error: ${message}\n`]);

  // The deep home serves with a short --socket, as the refusal says.
  const short = join(await tmpHome(), 'ob.sock');
  const daemon = await startServe(home, ['--socket', short]);
  try {
    const status = await runCli(['status', '--json', '--socket', short], { home });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ socket: short, store: join(home, 'db.json') });
  } finally {
    expect(await daemon.stop()).toBe(0);
  }
});
