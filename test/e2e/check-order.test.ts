/**
 * What only a real daemon shows: the management socket's mode, a second daemon refused, a stale
 * socket cleaned up, and an upstream token read from a file by the daemon process. The docs/contract.md §3
 * check order and OB_PROXY_MODELS are in test/inproc/data-plane.test.ts (the SDK meets each
 * refusal once on a socket in sdk.test.ts).
 */
import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hello, postChat } from '../helpers/chat.js';
import {
  BIN,
  NODE,
  type ServeProcess,
  type SimProcess,
  cliJson,
  runCli,
  startServe,
  tmpHome,
} from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';

const MODEL = 'gemma4:26b';
let sim: SimProcess;
let serve: ServeProcess;
let home: string;

interface ReadyJson {
  defaultKey: { secret: string };
}

beforeAll(async () => {
  ({ home, sim, serve } = await startDaemonAndSim({ instances: [] }));
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

describe('the management socket', () => {
  it('is mode 0600, refused to a second daemon while live, and cleaned up when stale', async () => {
    const sock = join(home, 'ob-proxy.sock');
    expect((await stat(sock)).mode & 0o777).toBe(0o600);
    const second = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(NODE, [BIN, 'serve', '--home', home, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      p.stdout.on('data', (b: Buffer) => {
        out += b.toString();
      });
      p.stderr.on('data', (b: Buffer) => {
        out += b.toString();
      });
      p.on('exit', (c) => resolve({ code: c, out }));
    });
    expect(second.code).toBe(1);
    // The same home: the store's lock refuses it before the socket is even looked at.
    expect(second.out).toMatch(/Another ob-proxy daemon \(pid \d+\) is already using the store/);
    // Another store, the same socket: the live socket refuses it.
    const sameSocket = await runCli([
      'serve',
      '--port',
      '0',
      '--store',
      join(await tmpHome(), 'db.json'),
      '--socket',
      sock,
    ]);
    expect(sameSocket.code).toBe(1);
    expect(sameSocket.stderr).toContain('Another ob-proxy daemon is already serving');

    const other = await tmpHome();
    const crashed = await startServe(other);
    crashed.proc.kill('SIGKILL');
    await crashed.exited;
    expect((await stat(join(other, 'ob-proxy.sock'))).isSocket()).toBe(true);
    const again = await startServe(other);
    expect((await runCli(['instances', 'list', '--json'], { home: other })).stdout.trim()).toBe('[]');
    await again.stop();
  });
});

describe('an upstream bearer token per instance', () => {
  it('is read by the daemon from a file, sent to the model server, and kept out of the store', async () => {
    const { writeFile, readFile } = await import('node:fs/promises');
    const h = await tmpHome();
    const tokenFile = join(h, 'vllm.token');
    await writeFile(tokenFile, 'upstream-secret-123\n', { mode: 0o600 });
    const s = await startServe(h);
    try {
      const missing = await runCli(
        ['instances', 'add', 'v0', '--model', MODEL, '--endpoint', sim.url, '--upstream-token-file', join(h, 'nope')],
        { home: h },
      );
      expect([missing.code, missing.stderr]).toEqual([
        1,
        expect.stringMatching(/cannot read the upstream token file .*nope \(ENOENT\)/),
      ]);
      const added = await cliJson<Record<string, unknown>>(
        ['instances', 'add', 'v1', '--model', MODEL, '--endpoint', sim.url, '--upstream-token-file', tokenFile],
        h,
      );
      expect(added.upstreamTokenFile).toBe(tokenFile);
      const key = (await cliJson<ReadyJson>(['instances', 'ready', 'v1'], h)).defaultKey.secret;
      const r = await postChat(s.baseUrl, key, hello(MODEL, { messages: [{ role: 'user', content: 'token-check' }] }));
      expect(r.status).toBe(200);
      const got = (await sim.requests()).filter((q) => JSON.stringify(q.body).includes('token-check')).at(-1)!;
      expect(got.headers.authorization).toBe('Bearer upstream-secret-123');
      await s.stop();
      expect(await readFile(join(h, 'db.json'), 'utf8')).not.toContain('upstream-secret-123');
      expect(s.lines.join('\n')).not.toContain('upstream-secret-123');
    } finally {
      await s.stop();
    }
  });
});
