import { describe, expect, it } from 'vitest';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole, trimmed, twoInstances } from './render-console.js';

describe('console: Revocations pane', () => {
  it('when keys were revoked then the audit trail shows when, which key, which instance and why, oldest first', async () => {
    let now = Date.parse('2026-11-23T09:00:00Z');
    const fake = new FakeDaemon(() => now);
    twoInstances(fake);
    const laptop = fake.addKey('gpu-1', 'old-laptop');
    await fake.revokeKey(laptop.id);
    now = Date.parse('2026-11-23T10:30:15Z');
    fake.halt('gpu-1', 'stopped');
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('3');
    expect(trimmed(await ui.waitForFrame('  revoked 2026'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
       1 Instances (2)  2 Keys: gpu-1 (0) [3 Revocations]
        WHEN (UTC)     KEY                         INSTANCE       WHY
      › 11-23 09:00:00 old-laptop (4eggv5wQw860)   gpu-1          revoked by operator
        11-23 10:30:15 default (bRqfAWGcrTFs)      gpu-1          instance stopped

        Key "old-laptop" (id 4eggv5wQw860) of gpu-1
        revoked 2026-11-23T09:00:00.000Z: revoked by operator.














      ↑↓ move  n new key  Tab pane  ? help  q back"
    `);
  });

  it('when a key is revoked while the pane is open then it appears at the end of the trail without a key press', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('tab');
    await ui.press('tab');
    expect(await ui.waitForFrame('[3 Revocations]')).toContain('No key has been revoked.');
    fake.halt('gpu-1', 'terminated');
    await ui.waitForFrame(/› 11-23 12:00:00 default \(\w{12}\) +gpu-1 +instance terminated/);
    const later = fake.addInstance('gpu-9', 'gemma4:26b', 'ready');
    const k = fake.addKey(later.id, 'ci');
    await fake.revokeKey(k.id);
    await ui.waitForFrame(/default \(\w{12}\) +gpu-1 +instance terminated\n.*11-23 12:00:00 ci \(\w{12}\) +gpu-9 +revoked by operator/);
  });

  it('when Tab and Shift+Tab are pressed then the panes cycle both ways, and Esc comes back to Instances', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('[1 Instances (2)]');
    await ui.press('shiftTab');
    await ui.waitForFrame('[3 Revocations]');
    await ui.press('shiftTab');
    await ui.waitForFrame('[2 Keys: gpu-1 (1)]');
    await ui.press('tab');
    await ui.waitForFrame('[3 Revocations]');
    await ui.press('escape');
    await ui.waitForFrame('[1 Instances (2)]');
    await ui.press('2');
    await ui.waitForFrame('[2 Keys: gpu-1 (1)]');
    await ui.press('q');
    await ui.waitForFrame('[1 Instances (2)]');
  });
});
