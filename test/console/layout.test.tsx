/**
 * The console fits its terminal: at 80×24 no frame is wider or taller than the screen (a frame
 * as tall as the screen would make Ink clear it each time: flicker), and it follows resizes.
 */
import { describe, expect, it } from 'vitest';
import type { RenderedInk } from '../helpers/ink.js';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole, twoInstances } from './render-console.js';

function assertFits(ui: RenderedInk, columns: number, rows: number, from = 0): void {
  for (const f of ui.frames().slice(from)) {
    const lines = f.split('\n');
    expect(lines.length, f).toBeLessThan(rows);
    for (const l of lines) expect([...l].length, l).toBeLessThanOrEqual(columns);
  }
}

function busy(): FakeDaemon {
  const fake = new FakeDaemon();
  twoInstances(fake);
  fake.addInstance('a-very-long-instance-id-that-goes-on-and-on', 'qwen3.6:27b', 'ready', {
    endpoint: 'https://model-server.internal.example.com:11434/some/long/path',
  });
  for (let i = 0; i < 25; i++) fake.addKey('gpu-1', `key-${i}-with-a-rather-long-name-for-a-narrow-column`);
  return fake;
}

describe('console: layout', () => {
  it('when every screen is visited at 80×24 then no frame is wider than 80 or as tall as 24', async () => {
    const fake = busy();
    const ui = renderConsole(fake, { columns: 80, rows: 24 });
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('Keys of gpu-1');
    await ui.press('end');
    await ui.press('x');
    await ui.waitForFrame('Revoke key');
    await ui.press('n');
    await ui.press('3');
    await ui.press('?');
    await ui.waitForFrame('Esc, q or ? closes');
    await ui.press('escape');
    await ui.press('n');
    await ui.press('enter');
    await ui.type('layout');
    await ui.press('enter');
    await ui.waitForFrame('shown once');
    await ui.press('c');
    await ui.waitForFrame('OSC 52');
    await ui.press('enter');
    await ui.waitForFrame('forgotten');
    fake.down();
    await ui.waitForFrame('not reachable');
    assertFits(ui, 80, 24);
  });

  it('when the terminal is resized then the next frames use the new size', async () => {
    const fake = busy();
    const ui = renderConsole(fake, { columns: 80, rows: 24 });
    await ui.waitForFrame('› gpu-1');
    expect(ui.lastFrame()).not.toContain('https://model-server.internal.example.com:11434/some/long/path');
    let mark = ui.frames().length;
    await ui.resize(160, 40);
    await ui.waitForFrame('https://model-server.internal.example.com:11434/some/long/path');
    expect(ui.lastFrame()).toContain('a-very-long-instance-id-that-goes-on-and-on');
    assertFits(ui, 160, 40, mark);
    await ui.resize(60, 16);
    await ui.waitForFrame((f) => f.split('\n')[0]!.length <= 60 && f.includes('? help'));
    // Ink repaints the old tree once on 'resize' before React has the new size; from the first
    // frame laid out for 60×16 on, everything fits.
    mark = ui.frames().findLastIndex((f) => f.split('\n').length >= 16) + 1;
    await ui.press('enter');
    await ui.waitForFrame('Keys of gpu-1');
    assertFits(ui, 60, 16, mark);
  });
});
