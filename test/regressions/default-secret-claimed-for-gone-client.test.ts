/**
 * Regression: `ob-proxy instances ready gpu-1` whose client went away before the answer (Ctrl-C
 * during the probe, the CLI's OB_PROXY_CLI_TIMEOUT on a daemon that was stopped or slow) still
 * had the daemon claim the default key's secret for that answer: written to a closed socket,
 * shown to nobody, and `keys reveal` then refused it as "already displayed". The only way out was
 * to revoke the default key and make another. Now a secret is claimed only for a client still
 * connected; otherwise it waits, unrevealed, for `keys reveal` (or the console), once.
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

it('keeps the default secret for keys reveal when the client that asked for it went away', async () => {
  await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
  serve.proc.kill('SIGSTOP');
  try {
    const gaveUp = await runCli(['instances', 'ready', 'gpu-1'], { home, env: { OB_PROXY_CLI_TIMEOUT: '0.5' } });
    expect([gaveUp.code, gaveUp.stdout]).toEqual([3, '']);
  } finally {
    serve.proc.kill('SIGCONT');
  }

  // The daemon goes on with what it was asked: ready, and a default key, not shown to anyone.
  const api = new DaemonClient(join(home, 'ob-proxy.sock'));
  const key = await eventually(
    async () => (await api.listKeys()).find((k: KeyView) => k.isDefault),
    'the default key of the abandoned ready',
  );
  expect(key).toMatchObject({ status: 'active', revealable: true });
  expect((await api.getInstance('gpu-1')).state).toBe('ready');
  expect(
    serve
      .logs()
      .filter((l) => l.msg === 'default key not shown: the client went away; reveal it once with keys reveal'),
  ).toEqual([expect.objectContaining({ instance: 'gpu-1', key: key.id })]);

  const revealed = await cliJson<{ id: string; secret: string }>(['keys', 'reveal', key.id], home);
  expect(revealed.id).toBe(key.id);
  expect((await postChat(serve.baseUrl, revealed.secret, chat())).status).toBe(200);
  // Once only.
  const again = await runCli(['keys', 'reveal', key.id], { home });
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/cannot be shown: it was already displayed/);
});
