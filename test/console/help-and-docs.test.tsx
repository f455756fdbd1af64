/**
 * `?` lists every key binding, and docs/console.md documents every one of them: both come from
 * the one keymap, and this test keeps the docs in step with it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { KEYMAP } from '../../cli/console/keymap.js';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole, twoInstances } from './render-console.js';

const DOCS = readFileSync(new URL('../../docs/console.md', import.meta.url), 'utf8');

describe('console: help and docs', () => {
  it('when ? is pressed then every binding of the keymap is listed, at 80×24', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('?');
    const frame = await ui.waitForFrame('Esc, q or ? closes');
    for (const group of KEYMAP) {
      expect(frame).toContain(group.where);
      for (const b of group.bindings) expect(frame).toMatch(new RegExp(`${b.keys.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} +${b.action.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    }
    expect(frame.split('\n').every((l) => [...l].length <= 80)).toBe(true);
    await ui.press('?');
    await ui.waitForFrame('› gpu-1');
  });

  it('when docs/console.md is read then it has a table row for every binding, under its heading', () => {
    for (const group of KEYMAP) {
      const at = DOCS.indexOf(`### ${group.where}`);
      expect(at, `docs/console.md has no "### ${group.where}" section`).toBeGreaterThan(-1);
      const section = DOCS.slice(at, DOCS.indexOf('\n### ', at + 1) === -1 ? undefined : DOCS.indexOf('\n### ', at + 1));
      for (const b of group.bindings) expect(section).toContain(`| ${b.keys} | ${b.action} |`);
    }
  });

  it('when docs/console.md is read then it shows each screen as captured from a terminal', () => {
    for (const marker of ['PACK END (UTC)', 'Keys of gpu-1', '[1 instance]', '[2 name]', 'shown once', 'Revoke key', 'WHEN (UTC)', 'not reachable', 'Esc, q or ? closes']) {
      expect(DOCS, marker).toContain(marker);
    }
    expect(DOCS).not.toMatch(/ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/);
  });
});
