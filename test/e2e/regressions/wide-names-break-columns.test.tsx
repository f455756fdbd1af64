/**
 * Regression (management plane, wide characters): a key name in CJK or with emoji is valid, but
 * the console's columns (cli/console/format.ts fit) and the CLI's tables (cli/output.ts table)
 * counted code points, not terminal cells. A name of 16 CJK characters, cut to 15 "characters",
 * took 30 cells: every column after it moved right and the request and token counts fell off the
 * line, and `keys list` put the HINT column of that row out of line with the others; typing a
 * CJK name in the console's new-key form pushed its length counter off the line. Columns are
 * now measured in cells, as Ink measures them: every row's columns start at the same cell.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import stringWidth from 'string-width';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fit } from '../../../cli/console/format.js';
import { FakeDaemon } from '../../console/fake-daemon.js';
import { renderConsole, twoInstances } from '../../console/render-console.js';
import { type ServeProcess, runCli, startServe, tmpHome } from '../../helpers/processes.js';

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
