/**
 * The key-generation flow: choose a ready instance, name the key (checked as the daemon checks
 * it), generate, see the secret once in its box, copy it, confirm, and never see it again.
 */
import { describe, expect, it } from 'vitest';
import { FakeDaemon } from './fake-daemon.js';
import { flat, renderConsole, trimmed, twoInstances } from './render-console.js';

const BOX_TITLE = 'New key "ci-bot" for gpu-1 · shown once';

async function openNameStep(fake: FakeDaemon) {
  const ui = renderConsole(fake);
  await ui.waitForFrame('› gpu-1');
  await ui.press('n');
  await ui.waitForFrame('[1 instance]');
  await ui.press('enter');
  await ui.waitForFrame('[2 name]');
  return ui;
}

describe('console: generate a key', () => {
  it('when a ready instance is chosen, named and generated then the secret is shown once in its box, and in no frame after Enter', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('n');
    expect(trimmed(await ui.waitForFrame('[1 instance]'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
      [1 Instances (2)] 2 Keys: gpu-1 (1)  3 Revocations
      New key · [1 instance] › 2 name › 3 secret
      Choose a ready instance (↑ ↓, Enter), Esc cancels.

      › gpu-1          gemma4:26b   ready
        gpu-2          qwen3.6:27b  pending    cannot be chosen: not ready yet















      ↑↓ choose an instance  Enter next  Esc back  Ctrl+U clear the name"
    `);
    await ui.press('enter');
    await ui.waitForFrame('[2 name]');
    await ui.type('ci-bot');
    expect(trimmed(await ui.waitForFrame('6/64'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
      [1 Instances (2)] 2 Keys: gpu-1 (1)  3 Revocations
      New key for gpu-1 (gemma4:26b) · 1 instance › [2 name] › 3 secret
      Type a name (who or what uses the key), Enter generates, Esc goes back.

      Name: ci-bot                                                                6/64
















      ↑↓ choose an instance  Enter next  Esc back  Ctrl+U clear the name"
    `);
    await ui.press('enter');
    const boxFrame = await ui.waitForFrame(BOX_TITLE);

    expect(fake.calls.filter((c) => c[0] === 'createKey')).toEqual([['createKey', 'gpu-1', 'ci-bot']]);
    const [secret] = fake.issued as [string];
    expect(secret).toMatch(/^ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}$/);
    expect(trimmed(boxFrame.replace(secret, '<the secret>'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
      [1 Instances (2)] 2 Keys: gpu-1 (2)  3 Revocations
      ╭──────────────────────────────────────────────────────────────────────────────╮
      │ New key "ci-bot" for gpu-1 · shown once                                      │
      │                                                                              │
      │ <the secret>                    │
      │                                                                              │
      │ Base URL  http://127.0.0.1:8080/v1                                           │
      │ SDK       new OpenAI({ baseURL: 'http://127.0.0.1:8080/v1', apiKey })        │
      │ Stored only as a hash: save it now, it is never shown again.                 │
      ╰──────────────────────────────────────────────────────────────────────────────╯
       c copy to clipboard   Enter I have saved it









      12:00:00 Key "ci-bot" created for gpu-1.
      c copy  Enter saved: forget it  (Ctrl+C quits; the secret is lost)"
    `);

    // Keys other than c and Enter do not close the box: the secret stays until confirmed.
    await ui.press('q');
    await ui.press('escape');
    expect(flat(await ui.waitForFrame('save it first'))).toContain('The secret is shown only until you press Enter: save it first (c copies it).');
    expect(ui.lastFrame()).toContain(secret);

    const confirmedAt = ui.frames().length;
    await ui.press('enter');
    const after = await ui.waitForFrame('the console has forgotten its secret');
    expect(after).toContain('› ci-bot');
    expect(after).toContain('Keys of gpu-1');
    // Wander through every pane and the help: the secret never comes back.
    for (const k of ['tab', 'tab', 'tab', '?'] as const) await ui.press(k);
    await ui.waitForFrame('Esc, q or ? closes');

    const frames = ui.frames();
    const withSecret = frames.map((f, i) => (f.includes(secret) ? i : -1)).filter((i) => i >= 0);
    expect(withSecret.length).toBeGreaterThan(0);
    for (const i of withSecret) {
      expect(frames[i]).toContain(BOX_TITLE);
      expect(i).toBeLessThan(confirmedAt);
    }
    expect(frames.slice(confirmedAt).some((f) => f.includes(secret) || f.includes(secret.slice(-20)))).toBe(false);
    expect(frames.filter((f) => f.includes(BOX_TITLE)).every((f) => f.includes(secret))).toBe(true);
  });

  it('when c is pressed in the box then the secret goes to the clipboard by OSC 52, with how to copy by hand if that fails', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = await openNameStep(fake);
    await ui.type('ci-bot');
    await ui.press('enter');
    await ui.waitForFrame(BOX_TITLE);
    expect(ui.stdout.clipboard).toEqual([]);
    await ui.press('c');
    const frame = flat(await ui.waitForFrame('OSC 52'));
    expect(frame).toContain('Sent to the clipboard (OSC 52). If nothing was copied (no OSC 52 support, or tmux without `set-clipboard on`), select the secret and copy it by hand.');
    expect(ui.stdout.clipboard).toHaveLength(1);
    // eslint-disable-next-line no-control-regex
    const m = /^\u001b\]52;c;([A-Za-z0-9+/=]+)\u0007$/.exec(ui.stdout.clipboard[0]!);
    expect(Buffer.from(m![1]!, 'base64').toString('utf8')).toBe(fake.issued[0]);
  });

  it('when the name is empty, too long or holds a control character then the daemon\'s rule is shown and nothing is created', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = await openNameStep(fake);

    await ui.press('enter');
    expect(await ui.waitForFrame('Key name must not be empty.')).toContain('0/64');

    await ui.press('x'.repeat(65));
    expect(await ui.waitForFrame('65/64')).toContain('Key name must be at most 64 characters.');
    await ui.press('backspace');
    const ok = await ui.waitForFrame('64/64');
    expect(ok).not.toContain('Key name must');

    await ui.press('\u0015'); // Ctrl+U clears
    await ui.waitForFrame('0/64');
    // A control key never becomes part of the name: BEL arrives as Ctrl+G, Tab as Tab.
    await ui.press('bell\u0007\tname');
    expect(await ui.waitForFrame('8/64')).toContain('Name: bellname');
    await ui.press('\u0015');
    await ui.waitForFrame('0/64');
    // An invisible character (right-to-left override) is text to a terminal; the daemon's rule refuses it.
    await ui.press('evil\u202egnp.exe');
    expect(await ui.waitForFrame('control or invisible')).toContain('Key name must not contain control or invisible characters.');
    await ui.press('enter');
    expect(ui.lastFrame()).toContain('[2 name]');
    expect(fake.calls.filter((c) => c[0] === 'createKey')).toEqual([]);
  });

  it('when typing a name then q, j, k, ?, n and digits are letters, not console keys', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = await openNameStep(fake);
    await ui.type('qjk?n123');
    const frame = await ui.waitForFrame('8/64');
    expect(frame).toContain('Name: qjk?n123');
    expect(frame).toContain('[2 name]');
  });

  it('when the instance is not ready then it cannot be chosen and says why; Esc steps back and cancels', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addInstance('gpu-3', 'gemma4:26b', 'stopped');
    fake.addInstance('gpu-4', 'gemma4:26b', 'ready');
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('n');
    const chooser = await ui.waitForFrame('[1 instance]');
    expect(chooser).toMatch(/gpu-2 +qwen3\.6:27b +pending +cannot be chosen: not ready yet\n/);
    expect(chooser).toMatch(/gpu-3 +gemma4:26b +stopped +cannot be chosen: stopped, keys revoked\n/);
    // The cursor moves over ready instances only: gpu-1 -> gpu-4.
    await ui.press('down');
    await ui.waitForFrame('› gpu-4');
    await ui.press('down');
    await ui.waitForFrame('› gpu-4');
    await ui.press('enter');
    expect(await ui.waitForFrame('[2 name]')).toContain('New key for gpu-4 (gemma4:26b)');
    await ui.press('escape');
    await ui.waitForFrame('[1 instance]');
    await ui.press('escape');
    await ui.waitForFrame('Ready: Enter shows its keys');
  });

  it('when no instance is ready then the chooser says how to make one ready', async () => {
    const fake = new FakeDaemon();
    fake.addInstance('gpu-2', 'qwen3.6:27b', 'pending');
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-2');
    await ui.press('n');
    expect(await ui.waitForFrame('[1 instance]')).toContain('No instance is ready: make one ready with `ob-proxy instances ready <id>`.');
    await ui.press('enter');
    expect(ui.lastFrame()).toContain('[1 instance]');
  });

  it('when the instance stops while the name is typed then the step says so and the daemon\'s refusal is shown, with no secret', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = await openNameStep(fake);
    await ui.type('late');
    fake.halt('gpu-1', 'stopped');
    await ui.waitForFrame('gpu-1 is stopped and its keys were revoked');
    await ui.press('enter');
    const frame = flat(await ui.waitForFrame('keys can be created only'));
    expect(frame).toContain('Instance gpu-1 is stopped: keys can be created only for a ready instance.');
    expect(frame).toContain('Name: late');
    expect(fake.issued).toEqual([]);
  });

  it('when the instance already has an active key of that name then it warns but allows it', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = await openNameStep(fake);
    await ui.type('default');
    expect(flat(await ui.waitForFrame('already has'))).toContain('gpu-1 already has an active key named "default"; a second one is allowed but harder to tell apart.');
    await ui.press('enter');
    await ui.waitForFrame('New key "default" for gpu-1 · shown once');
  });
});
