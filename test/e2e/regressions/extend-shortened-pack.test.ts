/**
 * Regression: `ob-proxy instances extend gpu-1 --pack-ends +8h` on a pack with 30 days left
 * (a duration counts from now, not from the current end: an easy slip) moved the end 29 days
 * earlier, answered "its keys keep working", and 8 hours later the daemon stopped the instance and
 * revoked every key of it for ever. Now `extend` refuses an end sooner than the current one,
 * exit 1 with nothing changed, naming the current end; `--shorten` does it on purpose.
 */
import { expect, it } from 'vitest';
import { postChat } from '../../helpers/chat.js';
import { cliJson, runCli } from '../../helpers/processes.js';
import { serveWithSimulator } from '../../helpers/serve-fixture.js';
import { MODEL, chat } from '../../helpers/store-home.js';

interface InstanceJson {
  packEndsAt: string;
  state: string;
  activeKeys: number;
}

const f = serveWithSimulator();

it('refuses an "extension" that ends the pack sooner; --shorten does it on purpose', async () => {
  const { sim, serve, home } = f;
  const added = await cliJson<InstanceJson>(
    ['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url, '--pack-ends', '+30d'],
    home,
  );
  const ready = await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', 'gpu-1'], home);
  const paid = added.packEndsAt;

  const slip = await runCli(['instances', 'extend', 'gpu-1', '--pack-ends', '+8h'], { home });
  expect(slip.code).toBe(1);
  expect(slip.stdout).toBe('');
  const sooner = /; (\S+) is sooner/.exec(slip.stderr)?.[1] ?? '';
  expect(Date.parse(sooner)).toBeLessThan(Date.parse(paid));
  expect(slip.stderr).toBe(
    `error: The pack of "gpu-1" already ends at ${paid}; ${sooner} is sooner, and every key of it would be revoked then. ` +
      `A duration such as +30d counts from now: give a time after ${paid}, or add --shorten to end the pack sooner on purpose.\n`,
  );
  const jsonSlip = await runCli(['instances', 'extend', 'gpu-1', '--pack-ends', '+8h', '--json'], { home });
  expect([jsonSlip.code, jsonSlip.stdout]).toEqual([1, '']);

  // Nothing changed: the pack, the keys, the audit trail.
  expect(await cliJson<InstanceJson>(['instances', 'show', 'gpu-1'], home)).toMatchObject({
    packEndsAt: paid,
    state: 'ready',
    activeKeys: 1,
  });
  expect((await postChat(serve.baseUrl, ready.defaultKey.secret, chat())).status).toBe(200);
  const audit = serve.logs().filter((l) => l.audit === 'instance.extended');
  expect(audit).toEqual([]);

  // Later is an extension, as before.
  const later = await cliJson<InstanceJson>(['instances', 'extend', 'gpu-1', '--pack-ends', '+40d'], home);
  expect(Date.parse(later.packEndsAt)).toBeGreaterThan(Date.parse(paid));

  // Sooner on purpose.
  const shortened = await cliJson<InstanceJson>(
    ['instances', 'extend', 'gpu-1', '--pack-ends', '+8h', '--shorten'],
    home,
  );
  expect(Date.parse(shortened.packEndsAt)).toBeLessThan(Date.parse(paid));
  expect(shortened).toMatchObject({ state: 'ready', activeKeys: 1 });
});
