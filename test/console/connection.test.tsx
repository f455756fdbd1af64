/**
 * The daemon not running, going away and coming back: a clear message (never a stack), and the
 * console reconnects on its own.
 */
import { describe, expect, it } from 'vitest';
import { FakeDaemon } from './fake-daemon.js';
import { flat, renderConsole, twoInstances } from './render-console.js';

describe('console: daemon connection', () => {
  it('when the daemon is not running then it says so with the socket and what to do, and shows the data once it is up', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.down();
    const ui = renderConsole(fake);
    const frame = await ui.waitForFrame('not reachable');
    expect(flat(frame)).toContain('The ob-proxy daemon is not reachable. Cannot reach the ob-proxy daemon at /tmp/obt-fake/ob-proxy.sock (ECONNREFUSED). Start it with `ob-proxy serve`, or pass the right --home/--socket.');
    expect(frame).toContain('● daemon unreachable');
    expect(frame).toContain('q quit  ? help');
    expect(ui.frames().join('\n')).not.toMatch(/^\s+at /m);
    fake.up();
    await ui.waitForFrame('● live');
    expect(ui.lastFrame()).toContain('› gpu-1');
    expect(fake.followerCount).toBe(1);
  });

  it('when the daemon goes away then the panes give way to the message, and they come back, current, when it returns', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('● live');
    fake.down();
    await ui.waitForFrame('not reachable');
    expect(ui.lastFrame()).not.toContain('› gpu-1');
    await ui.waitForFrame(/attempt [2-9]/);
    // What changed while it was away is read again on reconnection.
    fake.halt('gpu-1', 'stopped');
    fake.up();
    const back = await ui.waitForFrame('● live');
    expect(back).toMatch(/gpu-1 +gemma4:26b +stopped/);
    expect(fake.followerCount).toBe(1);
  });

  it('when the daemon is unreachable then actions say so, and q quits', async () => {
    const fake = new FakeDaemon();
    fake.down();
    const ui = renderConsole(fake);
    await ui.waitForFrame('not reachable');
    await ui.press('n');
    expect(await ui.waitForFrame('reconnects on its own')).toContain('The daemon is not reachable; the console reconnects on its own.');
    await ui.press('q');
    await ui.exited;
  });

  it('when q is pressed on the Instances pane then the console exits and stops following the daemon', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('● live');
    expect(fake.followerCount).toBe(1);
    await ui.press('q');
    await ui.exited;
    expect(fake.followerCount).toBe(0);
  });

  it('when the daemon answers before its public port is bound then the base URL is shown once it is known', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.baseUrl = '';
    const ui = renderConsole(fake);
    const early = await ui.waitForFrame('● live');
    expect(early.split('\n')[0]).toMatch(/^ob-proxy console · ● live +\? help$/);
    fake.baseUrl = 'http://127.0.0.1:9999';
    fake.halt('gpu-1', 'stopped'); // any event reads everything again
    await ui.waitForFrame('ob-proxy console · http://127.0.0.1:9999 · ● live');
  });
});
