/**
 * Regression (the test terminal): `waitFor` judged the screen after every pty read, and a read
 * can end in the middle of a frame. The console wraps each frame in a synchronized update (DEC
 * mode 2026, Ink's doing), and on a loaded machine a frame arrived in two reads: the console test
 * matched "not reachable" on the first half and then failed on the reason, which was in the second
 * half. A terminal that honours the mode shows the frame whole; the helper now judges only whole
 * frames. Here a program draws one frame in two writes a while apart.
 */
import { afterEach, expect, it } from 'vitest';
import { NODE } from '../../helpers/processes.js';
import { type Terminal, spawnTerminal } from '../../helpers/terminal.js';

const BSU = '\\x1b[?2026h';
const ESU = '\\x1b[?2026l';

// One frame in two writes 300 ms apart, then a frame of its own; the program stays until killed.
const PROGRAM = `
  process.stdout.write('${BSU}first half\\r\\n');
  setTimeout(() => process.stdout.write('second half\\r\\n${ESU}'), 300);
  setTimeout(() => process.stdout.write('${BSU}next frame\\r\\n${ESU}'), 600);
  setInterval(() => {}, 1000);
`;

let term: Terminal | undefined;

afterEach(async () => {
  await term?.close();
});

it('matches a frame only once it is whole', async () => {
  term = spawnTerminal(NODE, ['-e', PROGRAM], { cols: 40, rows: 6 });
  const whole = await term.waitFor('first half', 'the first frame');
  expect(whole.split('\n').slice(0, 2)).toEqual(['first half', 'second half']);
  // A frame that is whole matches as before.
  expect((await term.waitFor('next frame', 'the second frame')).split('\n').slice(0, 3)).toEqual([
    'first half',
    'second half',
    'next frame',
  ]);
});
