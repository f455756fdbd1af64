/**
 * Regression (management plane, wide characters), in a real terminal: the console measured
 * columns in code points, so a key named in CJK (valid: any printable name up to 64 characters)
 * took twice the cells its column had and pushed every later column right, off the line; a long
 * one also spilled the revoke question out of its box. A real terminal (a pseudo-terminal drawn by
 * xterm.js, with today's cell widths: test/helpers/terminal.ts) shows what a person would see; the
 * HINT and TOKENS columns of every key row now start under their titles.
 * (The same in the Ink renderer: wide-names-break-columns.test.tsx.)
 */
import stringWidth from 'string-width';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, cliJson, eventually, startServe, tmpHome } from '../../helpers/processes.js';
import { KEY, type Terminal, spawnTerminal } from '../../helpers/terminal.js';

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
