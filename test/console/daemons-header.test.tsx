/**
 * On a shared store the console's header says how the store's daemons stand, as `ob-proxy status`
 * lists them: all caught up, or which are behind on revocations or gone.
 */
import { expect, it } from 'vitest';
import type { DaemonView } from '../../src/services/revocation-confirmation.js';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole, twoInstances } from './render-console.js';

function daemon(id: string, state: 'live' | 'gone', revocationsBehind: number): DaemonView {
  return {
    id,
    self: false,
    host: 'gpu-host',
    pid: 10,
    startedAt: '2026-11-23T12:00:00.000Z',
    state,
    reportedAt: '2026-11-23T12:00:00.000Z',
    reportAgeMs: 100,
    appliedChange: 4,
    changeLag: 0,
    appliedRevocations: '812',
    revocationsBehind,
    lastInSyncAt: '2026-11-23T12:00:00.000Z',
  };
}

it('the header names the daemons behind and gone, and says when all are caught up', async () => {
  const fake = new FakeDaemon();
  twoInstances(fake);
  fake.daemons = {
    shared: true,
    newestRevocation: '812',
    daemons: [daemon('a1b2c3d4-0000', 'live', 0), daemon('e5f6a7b8-0000', 'live', 1), daemon('c9d0e1f2-0000', 'gone', 3)],
  };
  const ui = renderConsole(fake, { columns: 120 });
  const frame = await ui.waitForFrame('● live');
  expect(frame.split('\n')[0]).toContain('● live · 3 daemons: 1 behind (e5f6a7b8), 1 gone (c9d0e1f2)');
  fake.daemons = { shared: true, newestRevocation: '812', daemons: [daemon('a1b2c3d4-0000', 'live', 0)] };
  fake.halt('gpu-1', 'stopped');
  const after = await ui.waitForFrame('1 daemon, all caught up');
  expect(after.split('\n')[0]).toContain('● live · 1 daemon, all caught up');
});
