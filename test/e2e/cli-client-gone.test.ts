/**
 * A CLI that goes away or waits on a stopped daemon: bounded, and a secret made for it kept
 * for the next. One describe per defect found, its story above it.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { KeyView } from '../../src/wire/views.js';
import { postChat } from '../helpers/chat.js';
import { cliJson, eventually, runCli } from '../helpers/processes.js';
import {
  expectRevealedOnce,
  runCliWhileStopped,
  serveWithSimulator,
  STOPPED_CLI_TIMEOUT,
} from '../helpers/serve-fixture.js';
import { chat, MODEL, readyInstance } from '../helpers/store-home.js';

/**
 * Regression: with the daemon stopped (Ctrl-Z in the terminal that runs `ob-proxy serve`, a
 * SIGSTOP, a disk that hangs), every client command waited for ever: the kernel still accepts
 * connections on the socket, and the CLI had no bound on its wait. A cron job's `keys revoke`
 * hung with nothing said. Now a command gives up after OB_PROXY_CLI_TIMEOUT (default 120 s),
 * exit 3, saying what to check and that what was asked may still be done once the daemon runs
 * again, as it is here.
 */
describe('a command to a stopped daemon gives up after OB_PROXY_CLI_TIMEOUT', () => {
  const f = serveWithSimulator();

  it('gives up on a stopped daemon with exit 3 and a sentence, instead of waiting for ever', async () => {
    const { keyId, secret } = await readyInstance(f.home, 'gpu-1', f.sim.url);
    const socket = join(f.home, 'ob-proxy.sock');
    const silent =
      `error: The ob-proxy daemon at ${socket} did not answer within ${STOPPED_CLI_TIMEOUT} s (OB_PROXY_CLI_TIMEOUT): is it stopped (Ctrl-Z in its terminal, SIGSTOP) or stuck on its store? ` +
      'What was asked may still be done once it answers: check with `ob-proxy status` and the list commands before repeating it.\n';
    const gaveUp = await runCliWhileStopped(f, ['keys', 'list'], ['keys', 'revoke', keyId, '--json']);
    expect(gaveUp).toEqual([
      { code: 3, stdout: '', stderr: silent },
      { code: 3, stdout: '', stderr: silent },
    ]);

    // The revocation it was sent is done once the daemon runs again.
    const keys = await runCli(['keys', 'list', '--json'], { home: f.home, env: { OB_PROXY_CLI_TIMEOUT: '30' } });
    expect(keys.code, keys.stderr).toBe(0);
    expect((JSON.parse(keys.stdout) as { id: string; status: string }[]).map((k) => [k.id, k.status])).toEqual([
      [keyId, 'revoked'],
    ]);
    expect((await postChat(f.serve.baseUrl, secret, chat())).status).toBe(401);

    const bad = await runCli(['keys', 'list'], { home: f.home, env: { OB_PROXY_CLI_TIMEOUT: 'never' } });
    expect([bad.code, bad.stdout, bad.stderr]).toEqual([
      2,
      '',
      'error: OB_PROXY_CLI_TIMEOUT must be a number of seconds from 0.1 to 86400, got "never".\n',
    ]);
  });
});

/**
 * Regression: `ob-proxy keys create` whose client went away before the answer (Ctrl-C, or the
 * CLI's OB_PROXY_CLI_TIMEOUT on a daemon that was stopped or slow to write its store) left an
 * active key whose secret nobody ever saw, and no way to see it: `keys reveal` refused it, the
 * operator had to find and revoke it. Now the secret of a key whose creator went away is kept,
 * unrevealed, for `keys reveal` (or the console), once; the key works with it.
 */
describe("a created key's secret outlives its gone client, for one reveal", () => {
  const f = serveWithSimulator();

  it('keeps a new key’s secret for keys reveal when the client that created it went away', async () => {
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', f.sim.url], f.home);
    await cliJson(['instances', 'ready', 'gpu-1'], f.home);
    const [gaveUp] = await runCliWhileStopped(f, ['keys', 'create', '--instance', 'gpu-1', '--name', 'ci-runner']);
    expect([gaveUp!.code, gaveUp!.stdout]).toEqual([3, '']);

    // The daemon goes on with what it was asked: the key is made, not shown to anyone.
    const api = new DaemonClient(join(f.home, 'ob-proxy.sock'));
    const key = await eventually(
      async () => (await api.listKeys()).find((k: KeyView) => k.name === 'ci-runner'),
      'the key of the abandoned create',
    );
    expect(key).toMatchObject({ status: 'active', revealable: true });
    await eventually(
      () =>
        f.serve
          .logs()
          .some((l) => l.msg === 'new key not shown: the client went away; reveal it once with keys reveal'),
      'the log line of the kept secret',
    );
    await expectRevealedOnce(f, key.id);
  });
});

/**
 * Regression: `ob-proxy instances ready gpu-1` whose client went away before the answer (Ctrl-C
 * during the probe, the CLI's OB_PROXY_CLI_TIMEOUT on a daemon that was stopped or slow) still
 * had the daemon claim the default key's secret for that answer: written to a closed socket,
 * shown to nobody, and `keys reveal` then refused it as "already displayed". The only way out was
 * to revoke the default key and make another. Now a secret is claimed only for a client still
 * connected; otherwise it waits, unrevealed, for `keys reveal` (or the console), once.
 */
describe("a default key's secret is claimed only for a client still there", () => {
  const f = serveWithSimulator();

  it('keeps the default secret for keys reveal when the client that asked for it went away', async () => {
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', f.sim.url], f.home);
    const [gaveUp] = await runCliWhileStopped(f, ['instances', 'ready', 'gpu-1']);
    expect([gaveUp!.code, gaveUp!.stdout]).toEqual([3, '']);

    // The daemon goes on with what it was asked: ready, and a default key, not shown to anyone.
    const api = new DaemonClient(join(f.home, 'ob-proxy.sock'));
    const key = await eventually(
      async () => (await api.listKeys()).find((k: KeyView) => k.isDefault),
      'the default key of the abandoned ready',
    );
    expect(key).toMatchObject({ status: 'active', revealable: true });
    expect((await api.getInstance('gpu-1')).state).toBe('ready');
    // The line is written as the key is made, and reaches the log file a moment later: waited for.
    const said = await eventually(() => {
      const lines = f.serve
        .logs()
        .filter((l) => l.msg === 'default key not shown: the client went away; reveal it once with keys reveal');
      return lines.length > 0 && lines;
    }, 'the log line saying the default key was not shown');
    expect(said).toEqual([expect.objectContaining({ instance: 'gpu-1', key: key.id })]);
    await expectRevealedOnce(f, key.id);
  });
});
