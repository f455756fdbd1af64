/**
 * Canary for test/helpers/ink.ts: if an Ink or React upgrade changes how frames, input or resizes
 * reach the fake terminal, this fails first and says so, before every screen test does.
 */
import { Box, Text, useInput, useWindowSize } from 'ink';
import { useState } from 'react';
import { afterEach, describe, expect, it } from 'vitest';
import { type RenderedInk, renderInk } from '../helpers/ink.js';

function Probe() {
  const [log, setLog] = useState<string[]>([]);
  const { columns, rows } = useWindowSize();
  useInput((input, key) => {
    const name = key.return ? 'enter' : key.escape ? 'escape' : key.upArrow ? 'up' : key.downArrow ? 'down'
      : key.tab ? (key.shift ? 'shift-tab' : 'tab') : key.backspace ? 'backspace' : `"${input}"`;
    setLog((l) => [...l, name]);
  });
  return (
    <Box flexDirection="column">
      <Text color="green">size {columns}x{rows}</Text>
      <Text>keys: {log.join(' ')}</Text>
    </Box>
  );
}

let ui: RenderedInk | undefined;
afterEach(async () => {
  await ui?.unmount();
  ui = undefined;
});

describe('the in-repo Ink renderer', () => {
  it('when rendered then the first frame shows the fake terminal size', async () => {
    ui = renderInk(<Probe />, { columns: 80, rows: 24 });
    expect(await ui.waitForFrame('size 80x24')).toBe('size 80x24\nkeys:');
  });

  it('when keys are pressed then each reaches useInput as the key Ink parsed', async () => {
    ui = renderInk(<Probe />);
    await ui.waitForFrame('keys:');
    for (const k of ['up', 'down', 'enter', 'tab', 'shiftTab', 'backspace', 'escape'] as const) await ui.press(k);
    await ui.type('jq');
    expect(await ui.waitForFrame('"q"')).toBe('size 80x24\nkeys: up down enter tab shift-tab backspace escape "j" "q"');
  });

  it('when the terminal is resized then the next frame has the new size', async () => {
    ui = renderInk(<Probe />);
    await ui.waitForFrame('size 80x24');
    await ui.resize(100, 30);
    expect(await ui.waitForFrame('size 100x30')).toContain('size 100x30');
  });

  it('when an OSC 52 sequence is written then it is kept as a clipboard write, not a frame', async () => {
    ui = renderInk(<Probe />);
    await ui.waitForFrame('keys:');
    ui.stdout.write('\u001b]52;c;aGk=\u0007');
    expect(ui.stdout.clipboard).toEqual(['\u001b]52;c;aGk=\u0007']);
    expect(ui.frames().some((f) => f.includes('52;'))).toBe(false);
  });
});

describe('keystrokes that reach the terminal together', () => {
  it('when several keys arrive in one chunk then Ink sees them one at a time, escape sequences whole', async () => {
    const { KeystrokeInput, splitKeystrokes } = await import('../../cli/console/keystroke-input.js');
    expect(splitKeystrokes('k\r\u001b[A\u001b[5~\u001bOP\u001bxé😀\u001b')).toEqual(['k', '\r', '\u001b[A', '\u001b[5~', '\u001bOP', '\u001bx', 'é', '😀', '\u001b']);
    ui = renderInk(<Probe />, { input: (terminal) => new KeystrokeInput(terminal) });
    await ui.waitForFrame('keys:');
    ui.stdin.send('jk\r\u001b[B\t');
    expect(await ui.waitForFrame('tab')).toBe('size 80x24\nkeys: "j" "k" enter down tab');
  });

  it('when keys arrive while nobody reads then they wait, and go out one per turn once a reader is back', async () => {
    const { KeystrokeInput } = await import('../../cli/console/keystroke-input.js');
    const { FakeStdin } = await import('../helpers/ink.js');
    const { eventually } = await import('../helpers/processes.js');
    const terminal = new FakeStdin();
    const input = new KeystrokeInput(terminal);
    terminal.send('ab');
    const turns: string[][] = [];
    input.on('readable', () => {
      const turn: string[] = [];
      let k: string | null;
      while ((k = input.read()) !== null) turn.push(k);
      turns.push(turn);
    });
    await eventually(() => turns.length === 2, 'both keys');
    expect(turns).toEqual([['a'], ['b']]);
    input.close();
  });
});
