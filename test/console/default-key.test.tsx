/**
 * Default keys: when an instance becomes ready while the console is open, its default key's
 * secret is shown once, in the same box; one never displayed can be revealed once with r.
 */
import { describe, expect, it } from 'vitest';
import { obError } from '../../src/errors.js';
import { FakeDaemon } from './fake-daemon.js';
import { flat, renderConsole, twoInstances } from './render-console.js';

const TITLE = 'gpu-2 is ready: its default key · shown once';

describe('console: default keys', () => {
  it('when an instance becomes ready while the console is open then its default secret is shown once, and gone after Enter', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    const created = fake.makeReady('gpu-2', { claimed: false });
    const frame = await ui.waitForFrame(TITLE);
    expect(frame).toContain(created.secret);
    expect(frame).toContain('Base URL  http://127.0.0.1:8080/v1');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([['revealKey', created.id]]);

    const confirmedAt = ui.frames().length;
    await ui.press('enter');
    const after = await ui.waitForFrame('the console has forgotten its secret');
    expect(after).toContain('Keys of gpu-2');
    expect(after).toMatch(/› default +ob_sk_…\w{4} +active +yes/);
    const frames = ui.frames();
    frames.forEach((f, i) => {
      if (f.includes(created.secret)) {
        expect(f).toContain(TITLE);
        expect(i).toBeLessThan(confirmedAt);
      }
    });
    expect(frames.slice(confirmedAt).some((f) => f.includes(created.secret))).toBe(false);
  });

  it('when `instances ready` already took the secret then no box appears, only a notice', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    fake.makeReady('gpu-2', { claimed: true });
    await ui.waitForFrame('gpu-2 is ready and has a new default key.');
    await ui.waitForFrame(/gpu-2 +qwen3\.6:27b +ready/);
    expect(ui.lastFrame()).not.toContain('shown once');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([]);
  });

  it('when an instance becomes ready during key generation then its secret waits until the flow is closed', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('n');
    await ui.press('enter');
    await ui.waitForFrame('[2 name]');
    await ui.type('abc');
    fake.makeReady('gpu-2', { claimed: false });
    await ui.waitForFrame(/Revocations[\s\S]*Name: abc/);
    await ui.type('d');
    expect(await ui.waitForFrame('Name: abcd')).not.toContain('shown once');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([]);
    await ui.press('escape');
    await ui.press('escape');
    await ui.waitForFrame(TITLE);
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toHaveLength(1);
  });

  it('when a default key was never displayed then the console says so at start, and r reveals it once', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addInstance('gpu-3', 'gemma4:26b', 'pending');
    const created = fake.makeReady('gpu-3', { claimed: false });
    fake.calls.length = 0;
    const ui = renderConsole(fake);
    expect(flat(await ui.waitForFrame('never shown'))).toContain('gpu-3: default key never shown; select it in Keys and press r.');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([]);

    await ui.press('end');
    await ui.waitForFrame('› gpu-3');
    expect(ui.lastFrame()).toContain('Its default key was never shown: Enter, then r reveals it once.');
    await ui.press('enter');
    expect(await ui.waitForFrame('Keys of gpu-3')).toContain('Its secret was never shown: r reveals it, once.');
    await ui.press('r');
    expect(await ui.waitForFrame('Default key of gpu-3 · shown once')).toContain(created.secret);
    await ui.press('enter');
    await ui.waitForFrame('the console has forgotten its secret');
    await ui.press('r');
    await ui.waitForFrame('only an unshown default key can be revealed');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([['revealKey', created.id]]);
    expect(ui.frames().filter((f) => f.includes(created.secret)).every((f) => f.includes('Default key of gpu-3 · shown once'))).toBe(true);
  });

  it('when another console reveals it first then this one stops offering it, live', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addInstance('gpu-3', 'gemma4:26b', 'pending');
    const created = fake.makeReady('gpu-3', { claimed: false });
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('end');
    await ui.waitForFrame('› gpu-3');
    await ui.press('enter');
    await ui.waitForFrame('r reveals it, once');
    await fake.revealKey(created.id); // someone else, through the same API
    fake.calls.length = 0;
    await ui.waitForFrame((f) => f.includes('Keys of gpu-3') && !f.includes('r reveals it'));
    await ui.press('r');
    await ui.waitForFrame('only an unshown default key can be revealed');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([]);
    expect(ui.frames().some((f) => f.includes(created.secret))).toBe(false);
  });

  it('when the daemon refuses the reveal then the refusal is a notice, not a box', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addInstance('gpu-3', 'gemma4:26b', 'pending');
    fake.makeReady('gpu-3', { claimed: false });
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('end');
    await ui.press('enter');
    await ui.waitForFrame('r reveals it, once');
    fake.failNext('revealKey', obError('reveal_refused', { message: 'The secret of key X cannot be shown: the daemon restarted since it was made.' }));
    await ui.press('r');
    expect(flat(await ui.waitForFrame('could not be shown'))).toContain('The default key of gpu-3 could not be shown: The secret of key X');
    expect(ui.lastFrame()).not.toContain('shown once');
  });
});
