/**
 * Wide characters (CJK, emoji) in the console's columns, rendered and in a real terminal, and
 * the test terminal's frames. One describe per defect found, its story above it.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import stringWidth from 'string-width';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fit } from '../../cli/console/format.js';
import { FakeDaemon } from '../console/fake-daemon.js';
import { renderConsole, twoInstances } from '../console/render-console.js';
import { BIN, cliJson, eventually, NODE, runCli, type ServeProcess, startServe, tmpHome } from '../helpers/processes.js';
import { KEY, spawnTerminal, type Terminal } from '../helpers/terminal.js';

/**
 * Regression (management plane, wide characters): a key name in CJK or with emoji is valid, but
 * the console's columns (cli/console/format.ts fit) and the CLI's tables (cli/output.ts table)
 * counted code points, not terminal cells. A name of 16 CJK characters, cut to 15 "characters",
 * took 30 cells: every column after it moved right and the request and token counts fell off the
 * line, and `keys list` put the HINT column of that row out of line with the others; typing a
 * CJK name in the console's new-key form pushed its length counter off the line. Columns are
 * now measured in cells, as Ink measures them: every row's columns start at the same cell.
 */
describe('columns are measured in terminal cells, wide names too', () => {
const CJK = '日本語のキー名前テスト長い名前です';
const EMOJI = '🚀🚀🚀 rocket';
const MARKS = 'cafe\u0301-bot';

/** The terminal cell at which `needle` starts in `line`. */
function cellOf(line: string, needle: string): number {
  const at = line.indexOf(needle);
  return at < 0 ? -1 : stringWidth(line.slice(0, at));
}

describe('fit measures terminal cells', () => {
  it('pads and cuts wide and combining characters to exactly the width', () => {
    expect(fit('日本語', 8)).toBe('日本語  ');
    expect(fit(CJK, 15)).toBe('日本語のキー名…');
    expect(fit('日本語', 4)).toBe('日… ');
    expect(fit(MARKS, 10)).toBe(`${MARKS}  `);
    for (const name of [CJK, EMOJI, MARKS, 'plain'])
      for (const w of [1, 2, 3, 5, 15, 40]) expect(stringWidth(fit(name, w)), `${name} in ${w}`).toBe(w);
  });
});

describe('the console keeps its columns with wide names', () => {
  it('every key row has its hint and its counts at the same cells', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    for (const name of [CJK, EMOJI, MARKS]) fake.addKey('gpu-1', name, {});
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    const frame = await ui.waitForFrame('Keys of gpu-1');
    const rows = frame.split('\n').filter((l) => l.includes('ob_sk_…'));
    expect(rows).toHaveLength(4);
    const header = frame.split('\n').find((l) => l.includes('HINT'))!;
    for (const row of rows) {
      expect(cellOf(row, 'ob_sk_…'), row).toBe(cellOf(header, 'HINT'));
      expect(cellOf(row, '0/0'), row).toBe(cellOf(header, 'TOKENS'));
      expect(stringWidth(row), row).toBeLessThanOrEqual(80);
    }
  });
});

const AT = '2026-11-23T10:00:00.000Z';
const STORE = {
  version: 2,
  instances: [
    {
      id: 'gpu-1',
      deployment: 'dep-1',
      model: 'gemma4:26b',
      endpoint: 'http://127.0.0.1:9',
      state: 'ready',
      packEndsAt: null,
      createdAt: AT,
      updatedAt: AT,
    },
  ],
  keys: ['plain', CJK, EMOJI, MARKS].map((name, i) => ({
    id: `key${String(i).padStart(9, '0')}`,
    name,
    instance: 'gpu-1',
    deployment: 'dep-1',
    hash: createHash('sha256').update(String(i)).digest('hex'),
    hint: 'ob_sk_…AAAA',
    isDefault: false,
    status: 'active',
    createdAt: AT,
    lastUsedAt: null,
    revokedAt: null,
    revokeReason: null,
    usage: { requests: 0, promptTokens: 0, completionTokens: 0 },
  })),
  events: [],
};

describe('the CLI keeps its columns with wide names', () => {
  let serve: ServeProcess;
  let home: string;
  beforeAll(async () => {
    home = await tmpHome();
    await writeFile(join(home, 'db.json'), JSON.stringify(STORE), { mode: 0o600 });
    serve = await startServe(home);
  });
  afterAll(async () => {
    await serve?.stop();
  });

  it('keys list: the columns after the name start at the same cell on every line', async () => {
    const r = await runCli(['keys', 'list'], { home });
    expect(r.code).toBe(0);
    const [header, ...lines] = r.stdout.trimEnd().split('\n') as [string, ...string[]];
    expect(lines).toHaveLength(4);
    for (const line of lines) {
      expect(cellOf(line, 'gpu-1'), line).toBe(cellOf(header, 'INSTANCE'));
      expect(cellOf(line, 'ob_sk_…'), line).toBe(cellOf(header, 'HINT'));
    }
  });
});

describe('the console keeps the name counter on the line with a wide name', () => {
  it('typing a CJK name: the whole name and its counter stay on the one line', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('n');
    await ui.waitForFrame('[1 instance]');
    await ui.press('enter');
    await ui.waitForFrame('[2 name]');
    const name = '日本語の名前'.repeat(5);
    await ui.type(name);
    const frame = await ui.waitForFrame(name);
    const line = frame.split('\n').find((l) => l.startsWith('Name: '))!;
    expect(line.trimEnd()).toMatch(/ 30\/64$/);
    expect(stringWidth(line.trimEnd())).toBe(80);
  });
});
});

/**
 * Regression (management plane, wide characters), in a real terminal: the console measured
 * columns in code points, so a key named in CJK (valid: any printable name up to 64 characters)
 * took twice the cells its column had and pushed every later column right, off the line; a long
 * one also spilled the revoke question out of its box. A real terminal (a pseudo-terminal drawn by
 * xterm.js, with today's cell widths: test/helpers/terminal.ts) shows what a person would see; the
 * HINT and TOKENS columns of every key row now start under their titles.
 * (The same in the Ink renderer: the describe above, on columns measured in terminal cells.)
 */
describe('wide names keep the columns in a real terminal', () => {
const NAMES = ['日本語のキー名前テスト長い名前です', '🚀🚀🚀 rocket', '한국어 이름 열쇠 하나 둘 셋'];

let home: string;
let serve: ServeProcess;
let term: Terminal | undefined;

/** The terminal cell at which `needle` starts in `line`. */
function cellOf(line: string, needle: string): number {
  const at = line.indexOf(needle);
  return at < 0 ? -1 : stringWidth(line.slice(0, at));
}

beforeAll(async () => {
  home = await tmpHome();
  serve = await startServe(home);
  await cliJson(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', 'http://127.0.0.1:9'], home);
  await cliJson(['instances', 'ready', 'gpu-1', '--no-probe'], home);
  for (const name of NAMES) await cliJson(['keys', 'create', '--instance', 'gpu-1', '--name', name], home);
});

afterAll(async () => {
  await term?.close();
  await serve?.stop();
});

it('the Keys pane keeps every column under its title with CJK, Hangul and emoji names', async () => {
  const t = spawnTerminal(NODE, [BIN, 'console', '--home', home], { cols: 80, rows: 24 });
  term = t;
  await t.waitFor('● live', 'the console to connect');
  term.write(KEY.enter);
  await term.waitFor('Keys of gpu-1', 'the Keys pane');
  // The pane's title is drawn before its rows arrive from the daemon: wait for every row.
  const keyRows = (): number => t.lines().filter((l) => l.includes('ob_sk_…')).length;
  await eventually(() => keyRows() === 1 + NAMES.length, 'every key row drawn', 15_000);
  const lines = term.lines();
  const header = lines.find((l) => l.includes('HINT'))!;
  const rows = lines.filter((l) => l.includes('ob_sk_…'));
  expect(rows).toHaveLength(1 + NAMES.length);
  for (const row of rows) {
    expect(cellOf(row, 'ob_sk_…'), row).toBe(cellOf(header, 'HINT'));
    expect(cellOf(row, ' 0/0'), row).toBe(cellOf(header, 'TOKENS') - 1);
  }
});
});

/**
 * Regression (the test terminal): `waitFor` judged the screen after every pty read, and a read
 * can end in the middle of a frame. The console wraps each frame in a synchronized update (DEC
 * mode 2026, Ink's doing), and on a loaded machine a frame arrived in two reads: the console test
 * matched "not reachable" on the first half and then failed on the reason, which was in the second
 * half. A terminal that honours the mode shows the frame whole; the helper now judges only whole
 * frames. Here a program draws one frame in two writes a while apart.
 */
describe('the test terminal judges whole frames only', () => {
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
});
