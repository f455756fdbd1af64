/** Renders the console against a FakeDaemon on a fake 80×24 terminal, at a fixed time. */
import { afterEach } from 'vitest';
import { ConsoleApp } from '../../cli/console/console-app.js';
import { KeystrokeInput } from '../../cli/console/keystroke-input.js';
import { type RenderedInk, renderInk } from '../helpers/ink.js';
import type { FakeDaemon } from './fake-daemon.js';

export const NOW = Date.parse('2026-11-23T12:00:00Z');

export interface ConsoleOptions {
  columns?: number;
  rows?: number;
  colour?: boolean;
  clock?: () => number;
  tickMs?: number;
  statsMs?: number;
  pollMs?: number;
}

const mounted: RenderedInk[] = [];
afterEach(async () => {
  for (const ui of mounted.splice(0)) await ui.unmount();
});

/** Mounted until the end of the test. */
export function renderConsole(fake: FakeDaemon, opts: ConsoleOptions = {}): RenderedInk {
  const ui = renderInk(
    <ConsoleApp client={fake} colour={opts.colour ?? false} clock={opts.clock ?? (() => NOW)} retryMs={20}
      pollMs={opts.pollMs ?? 3_600_000} tickMs={opts.tickMs ?? 3_600_000} statsMs={opts.statsMs ?? 20} />,
    // The same keystroke splitting the real console puts in front of its stdin.
    { columns: opts.columns ?? 80, rows: opts.rows ?? 24, input: (terminal) => new KeystrokeInput(terminal) },
  );
  mounted.push(ui);
  return ui;
}

/** Two instances, as most screen tests start: gpu-1 ready with its default key, gpu-2 pending. */
export function twoInstances(fake: FakeDaemon): void {
  fake.addInstance('gpu-1', 'gemma4:26b', 'ready', { packEndsAt: '2026-11-23T15:12:00.000Z' });
  fake.addInstance('gpu-2', 'qwen3.6:27b', 'pending', { endpoint: null });
  fake.addKey('gpu-1', 'default', { isDefault: true, createdAt: '2026-11-23T10:00:00.000Z' });
}

/** The frame without trailing blank lines, for whole-frame comparisons. */
export function trimmed(frame: string): string {
  return frame.replace(/\s+$/, '');
}

/** The frame as one line, so assertions do not depend on where text wraps. */
export function flat(frame: string): string {
  return frame.replace(/\s+/g, ' ');
}
