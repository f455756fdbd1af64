/**
 * Regression: `ob-proxy keys create` whose client went away before the answer (Ctrl-C, or the
 * CLI's OB_PROXY_CLI_TIMEOUT on a daemon that was stopped or slow to write its store) left an
 * active key whose secret nobody ever saw, and no way to see it: `keys reveal` refused it, the
 * operator had to find and revoke it. Now the secret of a key whose creator went away is kept,
 * unrevealed, for `keys reveal` (or the console), once; the key works with it.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { KeyView } from '../../src/wire/views.js';
import { postChat } from '../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  eventually,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { MODEL, chat } from '../helpers/store-home.js';

let sim: SimProcess;
let serve: ServeProcess;
let home: string;
beforeAll(async () => {
  sim = await startSimulate([MODEL], ['--chunks', '1']);
  home = await tmpHome();
  serve = await startServe(home);
});
afterAll(async () => {
  serve?.proc.kill('SIGCONT');
  await serve?.stop();
  await sim?.stop();
});

it('keeps a new key’s secret for keys reveal when the client that created it went away', async () => {
  await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
  await cliJson(['instances', 'ready', 'gpu-1'], home);
  serve.proc.kill('SIGSTOP');
  try {
    const gaveUp = await runCli(['keys', 'create', '--instance', 'gpu-1', '--name', 'ci-runner'], {
      home,
      env: { OB_PROXY_CLI_TIMEOUT: '0.5' },
    });
    expect([gaveUp.code, gaveUp.stdout]).toEqual([3, '']);
  } finally {
    serve.proc.kill('SIGCONT');
  }

  // The daemon goes on with what it was asked: the key is made, not shown to anyone.
  const api = new DaemonClient(join(home, 'ob-proxy.sock'));
  const key = await eventually(
    async () => (await api.listKeys()).find((k: KeyView) => k.name === 'ci-runner'),
    'the key of the abandoned create',
  );
  expect(key).toMatchObject({ status: 'active', revealable: true });
  await eventually(
    () =>
      serve.logs().some((l) => l.msg === 'new key not shown: the client went away; reveal it once with keys reveal'),
    'the log line of the kept secret',
  );

  const revealed = await cliJson<{ id: string; secret: string }>(['keys', 'reveal', key.id], home);
  expect(revealed.id).toBe(key.id);
  expect((await postChat(serve.baseUrl, revealed.secret, chat())).status).toBe(200);
  // Once only.
  const again = await runCli(['keys', 'reveal', key.id], { home });
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/cannot be shown: it was already displayed/);
});
