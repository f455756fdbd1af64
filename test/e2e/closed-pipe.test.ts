/**
 * A reader that leaves early closes the pipe (`ob-proxy keys list | head -1`, a log reader that
 * died). No stack trace: a one-shot command whose answer could not be written exits 141 (as a
 * Unix tool killed by SIGPIPE), one that failed keeps its own code, and a simulator keeps serving
 * and stops with 0. Each process here starts with its stdout already closed, so its first write fails
 * with EPIPE whatever the pipe's buffer holds (a `| head` in a shell fails the same way, at the
 * write after the reader left, which is a race).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/free-port.js';
import { BIN, NODE, cliJson, eventually, tmpHome } from '../helpers/processes.js';
import { serveWithSimulator } from '../helpers/serve-fixture.js';
import { MODEL } from '../helpers/store-home.js';

function withStdoutClosed(args: string[]): { stderr: () => string; exited: Promise<number | null>; kill: () => void } {
  const proc = spawn(NODE, [BIN, ...args], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.destroy();
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { stderr: () => stderr, exited, kill: () => proc.kill('SIGTERM') };
}

describe('stdout closed by its reader', () => {
  const f = serveWithSimulator();

  it('--help, --version and a command answered by the daemon end 141, with nothing on stderr', async () => {
    for (const args of [['--help'], ['--version'], ['serve', '--help'], ['instances', 'list', '--home', f.home]]) {
      const p = withStdoutClosed(args);
      expect({ args, code: await p.exited, stderr: p.stderr() }).toEqual({ args, code: 141, stderr: '' });
    }
  });

  it('a command that failed keeps its own code and its error line', async () => {
    const p = withStdoutClosed(['instances', 'ready', 'no-such', '--home', f.home]);
    expect({ code: await p.exited, stderr: p.stderr() }).toEqual({
      code: 1,
      stderr: 'error: No instance "no-such". List instances with `ob-proxy instances list`.\n',
    });
  });

  it('a key made with its secret unread is made, and the command does not call that a success', async () => {
    await cliJson(['instances', 'add', 'pipe-1', '--model', MODEL, '--endpoint', f.sim.url], f.home);
    await cliJson(['instances', 'ready', 'pipe-1'], f.home);
    const p = withStdoutClosed(['keys', 'create', '--instance', 'pipe-1', '--name', 'unread', '-q', '--home', f.home]);
    expect({ code: await p.exited, stderr: p.stderr() }).toEqual({ code: 141, stderr: '' });
    const keys = await cliJson<{ name: string; status: string }[]>(['keys', 'list', '--instance', 'pipe-1'], f.home);
    expect(keys.filter((k) => k.name === 'unread').map((k) => k.status)).toEqual(['active']);
  });

  it('a simulator whose output nobody reads goes on serving, and stops cleanly', async () => {
    const port = await freePort();
    const pidFile = join(await tmpHome(), 'sim.pid');
    const p = withStdoutClosed(['simulate', '--port', String(port), '--model', MODEL, '--pid-file', pidFile]);
    try {
      const models = await eventually(async () => {
        const r = await fetch(`http://127.0.0.1:${port}/v1/models`);
        return r.ok ? ((await r.json()) as { data: { id: string }[] }) : undefined;
      }, 'the simulator to serve');
      expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    } finally {
      p.kill();
    }
    expect({ code: await p.exited, stderr: p.stderr() }).toEqual({ code: 0, stderr: '' });
  });
});
