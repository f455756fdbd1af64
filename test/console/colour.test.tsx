/**
 * NO_COLOR: chalk (inside Ink) ignores it, so the console decides. With colour off, no frame
 * carries a colour code; with it on, states are coloured. FORCE_COLOR is set before Ink loads so
 * that colours would show here if the console let them through (each test file is its own
 * process), which is what makes the NO_COLOR check able to fail.
 */
import { describe, expect, it } from 'vitest';
import { colourWanted } from '../../cli/console/theme.js';

process.env.FORCE_COLOR = '1';
const { FakeDaemon } = await import('./fake-daemon.js');
const { renderConsole, twoInstances } = await import('./render-console.js');

// SGR foreground/background colours: 30-37, 39-47, 49, 90-97, 100-107, and 38;…/48;… forms.
// eslint-disable-next-line no-control-regex
const COLOUR = /\u001b\[(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m/;

async function visitAll(colour: boolean) {
  const fake = new FakeDaemon();
  twoInstances(fake);
  fake.addInstance('gpu-3', 'gemma4:26b', 'failed');
  const ui = renderConsole(fake, { colour });
  await ui.waitForFrame('› gpu-1');
  await ui.press('enter');
  await ui.waitForFrame('Keys of gpu-1');
  await ui.press('n');
  await ui.press('enter');
  await ui.type('c');
  await ui.press('enter');
  await ui.waitForFrame('shown once');
  await ui.press('enter');
  await ui.press('x');
  await ui.waitForFrame('Revoke key');
  await ui.press('y');
  await ui.press('3');
  await ui.waitForFrame('revoked by operator');
  return ui.stdout.rawFrames;
}

describe('console: colour', () => {
  it('when colour is off (NO_COLOR) then no frame holds a colour code', async () => {
    const frames = await visitAll(false);
    expect(frames.length).toBeGreaterThan(5);
    expect(frames.filter((f) => COLOUR.test(f))).toEqual([]);
  });

  it('when colour is on then the states are coloured (the check above can fail)', async () => {
    const frames = await visitAll(true);
    const instances = frames.find((f) => f.includes('PACK END'))!;
    expect(instances).toContain('\u001b[32mready');
    expect(instances).toContain('\u001b[33mpending');
    expect(instances).toContain('\u001b[31mfailed');
  });

  it('when NO_COLOR is set to anything, or the output is not a terminal, then colour is off', () => {
    expect(colourWanted({}, true)).toBe(true);
    expect(colourWanted({ NO_COLOR: '' }, true)).toBe(true);
    expect(colourWanted({ NO_COLOR: '1' }, true)).toBe(false);
    expect(colourWanted({ NO_COLOR: 'false' }, true)).toBe(false);
    expect(colourWanted({}, false)).toBe(false);
  });
});
