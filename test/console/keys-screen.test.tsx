import { describe, expect, it } from 'vitest';
import { FakeDaemon } from './fake-daemon.js';
import { flat, renderConsole, trimmed, twoInstances } from './render-console.js';

function withKeys(): FakeDaemon {
  const fake = new FakeDaemon();
  twoInstances(fake);
  fake.addKey('gpu-1', 'ci-bot', {
    createdAt: '2026-11-23T11:55:00.000Z', lastUsedAt: '2026-11-23T11:59:40.000Z',
    usage: { requests: 12, promptTokens: 420, completionTokens: 31_337, reasoningTokens: 0, errors: 0, disconnects: 0, estimatedTokens: 0, firstUsedAt: '2026-11-23T11:56:00.000Z', byRoute: {} },
  });
  const old = fake.addKey('gpu-1', 'old-laptop', { createdAt: '2026-11-20T09:00:00.000Z', lastUsedAt: '2026-11-21T09:00:00.000Z' });
  void fake.revokeKey(old.id);
  fake.calls.length = 0;
  return fake;
}

async function openKeys(fake: FakeDaemon) {
  const ui = renderConsole(fake);
  await ui.waitForFrame('› gpu-1');
  await ui.press('enter');
  await ui.waitForFrame('Keys of gpu-1');
  return ui;
}

describe('console: Keys pane', () => {
  it('when an instance is opened then its keys show name, hint, status, default, created, last used, requests and tokens', async () => {
    const ui = await openKeys(withKeys());
    expect(trimmed(ui.lastFrame())).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
       1 Instances (2) [2 Keys: gpu-1 (2)] 3 Revocations
      Keys of gpu-1 (gemma4:26b, ready) · ← → other instance
        NAME           HINT         STATUS   DEF CREATED  LAST USED REQS  TOKENS
      › default        ob_sk_…VCHI  active   yes 2h ago   -             0 0/0
        ci-bot         ob_sk_…mu5T  active   no  5m ago   just now     12 420/31k
        old-laptop     ob_sk_…PgOK  revoked  no  3d ago   2d ago        0 0/0

        default · id bRqfAWGcrTFs · created 11-23 10:00:00 UTC
        0 requests · 0 in / 0 out · 0 reasoning · 0 errors · 0 left early
        Limits: none
        Enter shows it, l sets its limits, o rotates it, x revokes it (asks first).










      ↑↓ ←→ move  Enter show  l limits  o rotate  x revoke  r reveal  ? help  q back"
    `);
  });

  it('when a revoked key is selected then the detail says when and why it was revoked', async () => {
    const ui = await openKeys(withKeys());
    await ui.press('end');
    const frame = await ui.waitForFrame('› old-laptop');
    expect(frame).toContain('Revoked 11-23 12:00:00 UTC: revoked by operator.');
  });

  it('when x is pressed then the confirmation names the key; n keeps it and nothing is revoked', async () => {
    const fake = withKeys();
    const ui = await openKeys(fake);
    await ui.press('j');
    await ui.waitForFrame('› ci-bot');
    await ui.press('x');
    const ask = await ui.waitForFrame('Revoke key');
    expect(trimmed(ask)).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
       1 Instances (2) [2 Keys: gpu-1 (2)] 3 Revocations
      ┌──────────────────────────────────────────────────────────────────────────────┐
      │ Revoke key "ci-bot" (ob_sk_…mu5T) of gpu-1?                                  │
      │ Every request with it is refused (401) at once, for ever. This cannot be     │
      │ undone.                                                                      │
      │                                                                              │
      │ y revoke   n / Esc keep it                                                   │
      └──────────────────────────────────────────────────────────────────────────────┘













      y revoke  n / Esc keep it"
    `);
    await ui.press('n');
    await ui.waitForFrame('› ci-bot');
    await ui.press('delete');
    await ui.waitForFrame('Revoke key');
    await ui.press('escape');
    await ui.waitForFrame('› ci-bot');
    expect(fake.calls.filter((c) => c[0] === 'revokeKey')).toEqual([]);
    expect(fake.keys.find((k) => k.name === 'ci-bot')!.status).toBe('active');
  });

  it('when the confirmation is answered y then the key is revoked through the API and shown revoked', async () => {
    const fake = withKeys();
    const ui = await openKeys(fake);
    await ui.press('j');
    await ui.waitForFrame('› ci-bot');
    await ui.press('x');
    await ui.waitForFrame('Revoke key "ci-bot"');
    await ui.press('y');
    const frame = await ui.waitForFrame('it answers 401 from now on');
    const id = fake.keys.find((k) => k.name === 'ci-bot')!.id;
    expect(fake.calls.filter((c) => c[0] === 'revokeKey')).toEqual([['revokeKey', id]]);
    expect(await ui.waitForFrame(/ci-bot +ob_sk_…\w{4} +revoked/)).toContain('[2 Keys: gpu-1 (1)]');
    expect(frame).toContain('Revoked "ci-bot" of gpu-1: it answers 401 from now on.');
  });

  it('when x is pressed on a revoked key then it says so and asks nothing', async () => {
    const fake = withKeys();
    const ui = await openKeys(fake);
    await ui.press('end');
    await ui.waitForFrame('› old-laptop');
    await ui.press('x');
    expect(await ui.waitForFrame('already revoked')).toContain('"old-laptop" is already revoked.');
    expect(ui.lastFrame()).not.toContain('Revoke key');
  });

  it('when r is pressed on a key whose secret was shown then it refuses and says secrets are shown once', async () => {
    const fake = withKeys();
    const ui = await openKeys(fake);
    await ui.press('r');
    expect(flat(await ui.waitForFrame('only an unshown default'))).toContain('Shown once: only an unshown default key can be revealed (n: new key).');
    expect(fake.calls.filter((c) => c[0] === 'revealKey')).toEqual([]);
  });

  it('when ← → are pressed then the pane shows the keys of the previous / next instance', async () => {
    const fake = withKeys();
    const ui = await openKeys(fake);
    await ui.press('right');
    const other = await ui.waitForFrame('Keys of gpu-2');
    expect(other).toContain('No keys.');
    await ui.press('left');
    await ui.waitForFrame('Keys of gpu-1');
  });

  it('when a key is created or revoked elsewhere (the CLI) then the pane shows it without a key press', async () => {
    const fake = withKeys();
    const ui = await openKeys(fake);
    await fake.createKey('gpu-1', 'from-cli');
    await ui.waitForFrame(/from-cli +ob_sk_…\w{4} +active/);
    expect(ui.lastFrame()).toContain('Key "from-cli" created for gpu-1.');
    expect(ui.frames().some((f) => f.includes(fake.issued[0]!))).toBe(false);
    fake.halt('gpu-1', 'failed');
    // The instance and its keys page are read apart: the frame that has both.
    const frame = await ui.waitForFrame(/Keys of gpu-1 \(gemma4:26b, failed\)(?![\s\S]* active )/);
    expect(frame).toContain('gpu-1 is now failed');
    expect(frame).toMatch(/from-cli +ob_sk_…\w{4} +revoked/);
  });
});
