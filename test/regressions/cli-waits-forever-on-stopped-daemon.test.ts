/**
 * Regression: with the daemon stopped (Ctrl-Z in the terminal that runs `ob-proxy serve`, a
 * SIGSTOP, a disk that hangs), every client command waited for ever: the kernel still accepts
 * connections on the socket, and the CLI had no bound on its wait. A cron job's `keys revoke`
 * hung with nothing said. Now a command gives up after OB_PROXY_CLI_TIMEOUT (default 120 s),
 * exit 3, saying what to check and that what was asked may still be done once the daemon runs
 * again, as it is here.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postChat } from '../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { chat, readyInstance } from '../helpers/store-home.js';

let sim: SimProcess;
let serve: ServeProcess;
let home: string;
beforeAll(async () => {
  sim = await startSimulate(['gemma4:26b'], ['--chunks', '1']);
  home = await tmpHome();
  serve = await startServe(home);
});
afterAll(async () => {
  serve?.proc.kill('SIGCONT');
  await serve?.stop();
  await sim?.stop();
});

it('gives up on a stopped daemon with exit 3 and a sentence, instead of waiting for ever', async () => {
  const { keyId, secret } = await readyInstance(home, 'gpu-1', sim.url);
  const socket = join(home, 'ob-proxy.sock');
  const silent =
    `error: The ob-proxy daemon at ${socket} did not answer within 0.5 s (OB_PROXY_CLI_TIMEOUT): is it stopped (Ctrl-Z in its terminal, SIGSTOP) or stuck on its store? ` +
    'What was asked may still be done once it answers: check with `ob-proxy status` and the list commands before repeating it.\n';
  const env = { OB_PROXY_CLI_TIMEOUT: '0.5' };

  serve.proc.kill('SIGSTOP');
  try {
    for (const args of [
      ['keys', 'list'],
      ['keys', 'revoke', keyId, '--json'],
    ]) {
      const r = await runCli(args, { home, env });
      expect({ args, ...r }).toEqual({ args, code: 3, stdout: '', stderr: silent });
    }
  } finally {
    serve.proc.kill('SIGCONT');
  }

  // The revocation it was sent is done once the daemon runs again.
  const keys = await runCli(['keys', 'list', '--json'], { home, env: { OB_PROXY_CLI_TIMEOUT: '30' } });
  expect(keys.code, keys.stderr).toBe(0);
  expect((JSON.parse(keys.stdout) as { id: string; status: string }[]).map((k) => [k.id, k.status])).toEqual([
    [keyId, 'revoked'],
  ]);
  expect((await postChat(serve.baseUrl, secret, chat())).status).toBe(401);

  const bad = await runCli(['keys', 'list'], { home, env: { OB_PROXY_CLI_TIMEOUT: 'never' } });
  expect([bad.code, bad.stdout, bad.stderr]).toEqual([
    2,
    '',
    'error: OB_PROXY_CLI_TIMEOUT must be a number of seconds from 0.1 to 86400, got "never".\n',
  ]);
});
