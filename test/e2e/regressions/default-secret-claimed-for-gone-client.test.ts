/**
 * Regression: `ob-proxy instances ready gpu-1` whose client went away before the answer (Ctrl-C
 * during the probe, the CLI's OB_PROXY_CLI_TIMEOUT on a daemon that was stopped or slow) still
 * had the daemon claim the default key's secret for that answer: written to a closed socket,
 * shown to nobody, and `keys reveal` then refused it as "already displayed". The only way out was
 * to revoke the default key and make another. Now a secret is claimed only for a client still
 * connected; otherwise it waits, unrevealed, for `keys reveal` (or the console), once.
 */
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { DaemonClient } from '../../../cli/daemon-client.js';
import type { KeyView } from '../../../src/wire/views.js';
import { cliJson, eventually } from '../../helpers/processes.js';
import { expectRevealedOnce, runCliWhileStopped, serveWithSimulator } from '../../helpers/serve-fixture.js';
import { MODEL } from '../../helpers/store-home.js';

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
