/**
 * Regression: with the daemon stopped (Ctrl-Z in the terminal that runs `ob-proxy serve`, a
 * SIGSTOP, a disk that hangs), every client command waited for ever: the kernel still accepts
 * connections on the socket, and the CLI had no bound on its wait. A cron job's `keys revoke`
 * hung with nothing said. Now a command gives up after OB_PROXY_CLI_TIMEOUT (default 120 s),
 * exit 3, saying what to check and that what was asked may still be done once the daemon runs
 * again, as it is here.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { postChat } from '../../helpers/chat.js';
import { runCli } from '../../helpers/processes.js';
import { STOPPED_CLI_TIMEOUT, runCliWhileStopped, serveWithSimulator } from '../../helpers/serve-fixture.js';
import { chat, readyInstance } from '../../helpers/store-home.js';

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
