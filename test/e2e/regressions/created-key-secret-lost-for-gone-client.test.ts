/**
 * Regression: `ob-proxy keys create` whose client went away before the answer (Ctrl-C, or the
 * CLI's OB_PROXY_CLI_TIMEOUT on a daemon that was stopped or slow to write its store) left an
 * active key whose secret nobody ever saw, and no way to see it: `keys reveal` refused it, the
 * operator had to find and revoke it. Now the secret of a key whose creator went away is kept,
 * unrevealed, for `keys reveal` (or the console), once; the key works with it.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { DaemonClient } from '../../../cli/daemon-client.js';
import type { KeyView } from '../../../src/wire/views.js';
import { cliJson, eventually } from '../../helpers/processes.js';
import { expectRevealedOnce, runCliWhileStopped, serveWithSimulator } from '../../helpers/serve-fixture.js';
import { MODEL } from '../../helpers/store-home.js';

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
      f.serve.logs().some((l) => l.msg === 'new key not shown: the client went away; reveal it once with keys reveal'),
    'the log line of the kept secret',
  );
  await expectRevealedOnce(f, key.id);
});
