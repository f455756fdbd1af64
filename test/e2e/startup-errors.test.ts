/**
 * `serve` and `demo` fail fast and cleanly: every start-up error ends the process on
 * its own, with its exit code and one line on stderr, and leaves no socket and no temporary
 * folder behind. A process that hung (a timer started before listen()) is killed by the
 * generous guard below and fails the test on `signal`; nothing here measures time.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { type Server, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, startServe, tmpHome } from '../helpers/processes.js';

interface Exit {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      NODE,
      [BIN, ...args],
      { env: { ...process.env, NO_COLOR: '1', ...env }, timeout: 10_000, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { code?: number | string; signal?: string | null }) | null;
        resolve({
          code: e === null ? 0 : typeof e.code === 'number' ? e.code : null,
          signal: e?.signal ?? null,
          stdout,
          stderr,
        });
      },
    );
  });
}

let taken: Server;
let port: number;
beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  port = (taken.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((r) => taken.close(() => r())));

async function noSocketIn(home: string): Promise<void> {
  expect((await readdir(home)).filter((f) => f.endsWith('.sock') || f.endsWith('.tmp'))).toEqual([]);
}

describe('start-up errors end the process with their code and message', () => {
  it('port taken: serve exits 1 naming the port, no socket left', async () => {
    const home = await tmpHome();
    const r = await run(['serve', '--home', home, '--port', String(port)]);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^error: Cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\).*\\n$`));
    await noSocketIn(home);
  });

  it('port taken: demo exits 1 and removes the temporary home it made', async () => {
    const tmp = await mkdtemp(join(tmpdir(), 'obt-'));
    const r = await run(['demo', '--port', String(port)], { TMPDIR: tmp });
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: Cannot listen on .*EADDRINUSE.*\n$/);
    expect(await readdir(tmp)).toEqual([]);
  });

  it('store unreadable: exits 1 naming the store, which is left untouched', async () => {
    const home = await tmpHome();
    await writeFile(join(home, 'db.json'), '{garbage', { mode: 0o600 });
    const r = await run(['serve', '--home', home, '--port', '0']);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: The store .*db\.json cannot be read .*\n$/);
    expect(await readFile(join(home, 'db.json'), 'utf8')).toBe('{garbage');
    await noSocketIn(home);
  });

  it('store not a file: exits 1', async () => {
    const home = await tmpHome();
    await mkdir(join(home, 'db.json'));
    const r = await run(['serve', '--home', home, '--port', '0']);
    expect([r.signal, r.code]).toEqual([null, 1]);
    expect(r.stderr).toMatch(/^error: The store cannot be used: .* is not a regular file.*\n$/);
  });

  it('bad flag value: exits 2 before anything is opened', async () => {
    const home = await tmpHome();
    const r = await run(['serve', '--home', home, '--port', 'eighty']);
    expect([r.signal, r.code]).toEqual([null, 2]);
    expect(r.stderr).toBe(
      'error: --port (or OB_PROXY_PORT) must be a number from 0 to 65535, without a fraction, got "eighty".\n',
    );
    expect(await readdir(home)).toEqual([]);
  });

  it('pid file that cannot be written: exits 1 naming it, and stops what it had started', async () => {
    const home = await tmpHome();
    const r = await run(['serve', '--home', home, '--port', '0', '--pid-file', join(home, 'no-such-dir', 'serve.pid')]);
    expect([r.signal, r.code]).toEqual([null, 1]);
    expect(r.stderr).toMatch(
      /^error: Cannot write the pid file .*serve\.pid \(ENOENT\)\. Give --pid-file a path in a folder this user may write\.\n$/,
    );
    await noSocketIn(home);
  });

  describe('with a daemon running', () => {
    let serve: ServeProcess;
    beforeAll(async () => {
      serve = await startServe(await tmpHome());
    });
    afterAll(async () => {
      await serve.stop();
    });

    it('store locked by another daemon: exits 1 naming its pid', async () => {
      const r = await run(['serve', '--home', serve.home, '--port', '0']);
      expect([r.signal, r.code]).toEqual([null, 1]);
      expect(r.stderr).toMatch(
        new RegExp(`^error: Another ob-proxy daemon \\(pid ${serve.proc.pid}\\) is already using the store .*\\n$`),
      );
    });

    it('socket held by another daemon: exits 1, and the other daemon keeps its socket', async () => {
      const home = await tmpHome();
      const socket = join(serve.home, 'ob-proxy.sock');
      const r = await run(['serve', '--home', home, '--socket', socket, '--port', '0']);
      expect([r.signal, r.code]).toEqual([null, 1]);
      expect(r.stderr).toMatch(/^error: Another ob-proxy daemon is already serving on .*ob-proxy\.sock.*\n$/);
      expect(await readdir(serve.home)).toContain('ob-proxy.sock');
      await noSocketIn(home);
    });
  });
});
