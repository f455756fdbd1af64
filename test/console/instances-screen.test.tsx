import { describe, expect, it } from 'vitest';
import { FakeDaemon } from './fake-daemon.js';
import { NOW, flat, renderConsole, trimmed, twoInstances } from './render-console.js';

describe('console: Instances pane', () => {
  it('when the console opens then each instance shows id, model, coloured state, endpoint, pack end with time left and active keys', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addInstance('gpu-3', 'gemma4:26b', 'terminated', { endpoint: 'http://10.0.0.7:11434', packEndsAt: '2026-11-22T08:00:00.000Z' });
    const ui = renderConsole(fake);
    expect(trimmed(await ui.waitForFrame('gpu-3'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
      [1 Instances (3)] 2 Keys: gpu-1 (1)  3 Revocations
        ID          MODEL        STATE      ENDPOINT          PACK END (UTC)     KEYS
      › gpu-1       gemma4:26b   ready      http://10.0.0.5:… 11-23 15:12 3h 12m    1
        gpu-2       qwen3.6:27b  pending    -                 -                     0
        gpu-3       gemma4:26b   terminated http://10.0.0.7:… 11-22 08:00 ended     0

        gpu-1 · gemma4:26b · http://10.0.0.5:11434
        Ready: Enter shows its keys, n generates a new one.













      ↑↓ move  Enter keys  s stop  f fail  e extend  n new key  ? help  q quit"
    `);
  });

  it('when an instance has aliases then every instance says its aliases under the table, none included', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.instances[0]!.aliases = ['claude-sonnet-4-5', 'claude-haiku-4-5'];
    fake.instances[1]!.aliases = [];
    const ui = renderConsole(fake);
    expect(trimmed(await ui.waitForFrame('Aliases:'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
      [1 Instances (2)] 2 Keys: gpu-1 (1)  3 Revocations
        ID          MODEL        STATE      ENDPOINT          PACK END (UTC)     KEYS
      › gpu-1       gemma4:26b   ready      http://10.0.0.5:… 11-23 15:12 3h 12m    1
        gpu-2       qwen3.6:27b  pending    -                 -                     0

        gpu-1 · gemma4:26b · http://10.0.0.5:11434
        Aliases: claude-sonnet-4-5, claude-haiku-4-5
        Ready: Enter shows its keys, n generates a new one.













      ↑↓ move  Enter keys  s stop  f fail  e extend  n new key  ? help  q quit"
    `);
    await ui.press('j');
    expect(await ui.waitForFrame('› gpu-2')).toContain('\n  Aliases: none\n');
  });

  it('when aliases change in the daemon then the pane and the status line show it without a key press', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    expect(await ui.waitForFrame('› gpu-1')).not.toContain('Aliases');
    fake.alias('gpu-1', ['claude-sonnet-4-5']);
    const frame = await ui.waitForFrame('Aliases: claude-sonnet-4-5\n');
    expect(frame).toContain('12:00:00 Aliases of gpu-1: claude-sonnet-4-5.');
    fake.alias('gpu-1', []);
    const cleared = await ui.waitForFrame('gpu-1 has no aliases now.');
    expect(cleared).not.toContain('Aliases:');
  });

  it('when the selection moves to an instance that is not ready then it says why no key can be made', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('j');
    const frame = flat(await ui.waitForFrame('› gpu-2'));
    expect(frame).toContain('No new keys: gpu-2 is pending, not ready yet: make it ready with `ob-proxy instances ready gpu-2`.');
    await ui.press('up');
    expect(await ui.waitForFrame('› gpu-1')).toContain('Ready: Enter shows its keys, n generates a new one.');
    await ui.press('down');
    await ui.waitForFrame('› gpu-2');
    await ui.press('k');
    await ui.waitForFrame('› gpu-1');
  });

  it('when an instance changes state in the daemon then the pane shows it without a key press', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame(/gpu-1\s+gemma4:26b\s+ready/);
    fake.halt('gpu-1', 'stopped');
    const frame = await ui.waitForFrame(/gpu-1\s+gemma4:26b\s+stopped/);
    expect(frame).toMatch(/› gpu-1 +gemma4:26b +stopped +http:\/\/10\.0\.0\.5:… 11-23 15:12 3h 12m +0\n/);
    expect(frame).toContain('12:00:00 gpu-1 is now stopped: its keys were revoked.');
    expect(flat(frame)).toContain('No new keys: gpu-1 is stopped and its keys were revoked: make it ready again to create keys.');
  });

  it('when time passes then the time left of a pack counts down on its own', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    let now = NOW;
    const ui = renderConsole(fake, { clock: () => now, tickMs: 10 });
    await ui.waitForFrame('11-23 15:12 3h 12m');
    now += 2 * 3_600_000;
    await ui.waitForFrame('11-23 15:12 1h 12m');
    now += 3_600_000 + 13 * 60_000;
    await ui.waitForFrame('11-23 15:12 ended');
  });

  it('when there are more instances than rows then the list scrolls with the selection and says where it is', async () => {
    const fake = new FakeDaemon();
    for (let i = 1; i <= 30; i++) fake.addInstance(`node-${String(i).padStart(2, '0')}`, 'gemma4:26b', 'pending');
    const ui = renderConsole(fake);
    await ui.waitForFrame('1-13 of 30');
    await ui.press('end');
    const end = await ui.waitForFrame('› node-30');
    expect(end).toContain('18-30 of 30');
    expect(end).not.toContain('node-01');
    await ui.press('home');
    await ui.waitForFrame('› node-01');
    await ui.press('pageDown');
    await ui.waitForFrame('› node-15');
  });

  it('when Enter is pressed on an instance then its keys are shown', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    expect(await ui.waitForFrame('Keys of gpu-1')).toContain('[2 Keys: gpu-1 (1)]');
  });

  it('when there are no instances then it says how to add one', async () => {
    const ui = renderConsole(new FakeDaemon());
    expect(flat(await ui.waitForFrame('No instances yet'))).toContain('Add one with `ob-proxy instances add <id> --model <model> --endpoint <url>`.');
  });
});
