/**
 * Regression (management plane, wide characters), in a real terminal: the console measured
 * columns in code points, so a key named in CJK (valid: any printable name up to 64 characters)
 * took twice the cells its column had and pushed every later column right, off the line; a long
 * one also spilled the revoke question out of its box. tmux draws what a person would see; the
 * HINT and TOKENS columns of every key row now start under their titles.
 * (The same in the Ink renderer: wide-names-break-columns.test.tsx.)
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import stringWidth from 'string-width';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, cliJson, eventually, startServe, tmpHome } from '../helpers/processes.js';

const NAMES = ['日本語のキー名前テスト長い名前です', '🚀🚀🚀 rocket', '한국어 이름 열쇠 하나 둘 셋'];

let home: string;
let serve: ServeProcess;
let tmuxSocket: string;

function tmux(...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    // -u: the pane is UTF-8 whatever the test's locale, as a person's terminal is.
    execFile(
      'tmux',
      ['-u', '-S', tmuxSocket, '-f', '/dev/null', ...args],
      { timeout: 10_000 },
      (err, stdout, stderr) => {
        if (err !== null) reject(new Error(`tmux ${args.join(' ')}: ${stderr || err.message}`));
        else resolve(stdout);
      },
    );
  });
}

async function waitForScreen(match: string): Promise<string> {
  let last = '';
  try {
    return await eventually(
      async () => {
        last = await tmux('capture-pane', '-p', '-t', 'wide');
        return last.includes(match) ? last : false;
      },
      match,
      15_000,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- screen ---\n${last}`, { cause: err });
  }
}

/** The terminal cell at which `needle` starts in `line`. */
function cellOf(line: string, needle: string): number {
  const at = line.indexOf(needle);
  return at < 0 ? -1 : stringWidth(line.slice(0, at));
}

beforeAll(async () => {
  home = await tmpHome();
  tmuxSocket = join(home, 'tmux.sock');
  serve = await startServe(home);
  await cliJson(['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', 'http://127.0.0.1:9'], home);
  await cliJson(['instances', 'ready', 'gpu-1', '--no-probe'], home);
  for (const name of NAMES) await cliJson(['keys', 'create', '--instance', 'gpu-1', '--name', name], home);
});

afterAll(async () => {
  await tmux('kill-server').catch(() => {});
  await serve?.stop();
});

it('the Keys pane keeps every column under its title with CJK, Hangul and emoji names', async () => {
  await tmux('new-session', '-d', '-s', 'wide', '-x', '80', '-y', '24', `'${NODE}' '${BIN}' console --home '${home}'`);
  await waitForScreen('● live');
  await tmux('send-keys', '-t', 'wide', 'Enter');
  const screen = await waitForScreen('Keys of gpu-1');
  const lines = screen.split('\n');
  const header = lines.find((l) => l.includes('HINT'))!;
  const rows = lines.filter((l) => l.includes('ob_sk_…'));
  expect(rows).toHaveLength(1 + NAMES.length);
  for (const row of rows) {
    expect(cellOf(row, 'ob_sk_…'), row).toBe(cellOf(header, 'HINT'));
    expect(cellOf(row, ' 0/0'), row).toBe(cellOf(header, 'TOKENS') - 1);
  }
});
