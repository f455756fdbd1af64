/**
 * The Keys and Revocations panes ask the daemon for the page they show (`limit` = the rows that
 * fit at 80×24, `after` = the cursor of the page before), walk a long list page by page, and
 * read a page again only when an event names one of its rows.
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/processes.js';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole } from './render-console.js';

/** Rows of keys the Keys pane has room for at 80×24 (body 19 lines, 8 of them not rows). */
const KEYS_FIT = 11;
/** Rows of revocations the Revocations pane has room for at 80×24. */
const REVOCATIONS_FIT = 14;

function name(i: number): string {
  return `key-${String(i).padStart(3, '0')}`;
}

/** gpu-1 with `n` keys, key-001 first; gpu-2 with one key of its own. */
function manyKeys(n: number): { fake: FakeDaemon; ids: string[] } {
  const fake = new FakeDaemon();
  fake.addInstance('gpu-1', 'gemma4:26b', 'ready');
  fake.addInstance('gpu-2', 'gemma4:26b', 'ready');
  const ids = Array.from({ length: n }, (_, i) => fake.addKey('gpu-1', name(i + 1)).id);
  fake.addKey('gpu-2', 'other');
  fake.calls.length = 0;
  return { fake, ids };
}

/** The page requests of the Keys pane (the first-read check for unrevealed defaults asks with a status). */
function keyPages(fake: FakeDaemon, from = 0): unknown[] {
  return fake.calls.slice(from).filter((c) => c[0] === 'keyPage' && (c[1] as { status?: string }).status === undefined).map((c) => c[1]);
}

describe('console: long lists by the page', () => {
  it('when the Keys pane walks 120 keys then it asks for each page once, by cursor, and says where it is', async () => {
    const { fake, ids } = manyKeys(120);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame(/› key-001[\s\S]*key-011[\s\S]*keys 1-11 of many · PgDn next page/);
    expect(ui.lastFrame()).not.toContain('key-012');
    for (let p = 1; p < 11; p++) {
      await ui.press('pageDown');
      const last = Math.min(120, (p + 1) * KEYS_FIT);
      await ui.waitForFrame(`keys ${p * KEYS_FIT + 1}-${last} of ${last === 120 ? '120' : 'many · PgDn next page'} · PgUp previous`);
      await ui.waitForFrame(`› ${name(p * KEYS_FIT + 1)}`);
    }
    expect(ui.lastFrame()).toContain('key-120');
    // The first page with no cursor, then each after the last key of the page before; never the whole list.
    expect(keyPages(fake)).toEqual([
      { instance: 'gpu-1', limit: KEYS_FIT },
      ...Array.from({ length: 10 }, (_, p) => ({ instance: 'gpu-1', limit: KEYS_FIT, after: ids[(p + 1) * KEYS_FIT - 1] })),
    ]);
    // A list method the console does not have cannot be called: every read of keys is a page.
    expect(fake.calls.filter((c) => c[0] === 'keyPage').every((c) => (c[1] as { limit: number }).limit <= KEYS_FIT)).toBe(true);

    const before = fake.calls.length;
    await ui.press('pageDown');
    await ui.press('pageUp');
    await ui.waitForFrame('keys 100-110 of many');
    await ui.press('home');
    await ui.waitForFrame('keys 1-11 of many');
    expect(keyPages(fake, before)).toEqual([
      { instance: 'gpu-1', limit: KEYS_FIT, after: ids[98] },
      { instance: 'gpu-1', limit: KEYS_FIT },
    ]);
  });

  it('when ↓ passes the last row of a page then the next page comes, and ↑ from its first row goes back to the last', async () => {
    const { fake, ids } = manyKeys(30);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('keys 1-11 of many');
    await ui.press('end');
    await ui.waitForFrame('› key-011');
    await ui.press('j');
    await ui.waitForFrame(/› key-012[\s\S]*keys 12-22 of many/);
    await ui.press('k');
    await ui.waitForFrame(/› key-011[\s\S]*keys 1-11 of many/);
    expect(keyPages(fake)).toEqual([
      { instance: 'gpu-1', limit: KEYS_FIT },
      { instance: 'gpu-1', limit: KEYS_FIT, after: ids[10] },
      { instance: 'gpu-1', limit: KEYS_FIT },
    ]);
  });

  it('when an event names a key of the shown page then that page is read again; one about another key asks nothing', async () => {
    const { fake, ids } = manyKeys(40);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('keys 1-11 of many');
    const mark = fake.calls.length;

    // Off the page: a key of page 3, a key of another instance, a key created (it lands on the last page).
    await fake.revokeKey(ids[30]!);
    await fake.revokeKey(fake.keys.find((k) => k.name === 'other')!.id);
    await fake.createKey('gpu-1', 'late');
    await ui.waitForFrame('Key "late" created for gpu-1.');
    // A key press renders again, so whatever the events set off has been asked by now.
    await ui.press('j');
    await ui.waitForFrame('› key-002');
    expect(keyPages(fake, mark)).toEqual([]);

    // On the page: key-003 revoked elsewhere.
    await fake.revokeKey(ids[2]!);
    await ui.waitForFrame(/key-003 +ob_sk_…\w{4} +revoked/);
    const reads = keyPages(fake, mark);
    expect(reads.length).toBeGreaterThan(0);
    expect(new Set(reads.map((r) => JSON.stringify(r)))).toEqual(new Set([JSON.stringify({ instance: 'gpu-1', limit: KEYS_FIT })]));
    expect(fake.calls.slice(mark).filter((c) => c[0] === 'revocationPage')).toEqual([]);
  });

  it('when a key is created and the last page is shown then it appears there', async () => {
    const { fake, ids } = manyKeys(15);
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('keys 1-11 of many');
    await ui.press('pageDown');
    await ui.waitForFrame('keys 12-15 of 15');
    const mark = fake.calls.length;
    await fake.createKey('gpu-1', 'late');
    await ui.waitForFrame(/late +ob_sk_…\w{4} +active[\s\S]*keys 12-16 of 16/);
    expect(new Set(keyPages(fake, mark).map((r) => JSON.stringify(r)))).toEqual(
      new Set([JSON.stringify({ instance: 'gpu-1', limit: KEYS_FIT, after: ids[10] })]),
    );
  });

  it('when the counters are read again then only the shown page is asked for', async () => {
    const { fake, ids } = manyKeys(30);
    const ui = renderConsole(fake, { pollMs: 20 });
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('keys 1-11 of many');
    await ui.press('pageDown');
    await ui.waitForFrame('keys 12-22 of many');
    const mark = fake.calls.length;
    fake.keys.find((k) => k.id === ids[12])!.usage.requests = 7;
    await ui.waitForFrame(/key-013 +ob_sk_…\w{4} +active +no +just now +- +7 /);
    await eventually(() => keyPages(fake, mark).length >= 3, 'three polls');
    const asked = new Set(keyPages(fake, mark).map((r) => JSON.stringify(r)));
    expect(asked).toEqual(new Set([JSON.stringify({ instance: 'gpu-1', limit: KEYS_FIT, after: ids[10] })]));
    expect(fake.calls.slice(mark).filter((c) => c[0] === 'revocationPage')).toEqual([]);
  });

  it('when the daemon cuts a page short then the next one starts after it and the position counts the rows shown', async () => {
    const { fake, ids } = manyKeys(12);
    fake.pageCut = 5;
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame(/› key-001[\s\S]*key-005[\s\S]*keys 1-5 of many/);
    await ui.press('pageDown');
    await ui.waitForFrame(/› key-006[\s\S]*key-010[\s\S]*keys 6-10 of many/);
    await ui.press('pageDown');
    await ui.waitForFrame(/› key-011[\s\S]*key-012[\s\S]*keys 11-12 of 12 · PgUp previous/);
    expect(keyPages(fake)).toEqual([
      { instance: 'gpu-1', limit: KEYS_FIT },
      { instance: 'gpu-1', limit: KEYS_FIT, after: ids[4] },
      { instance: 'gpu-1', limit: KEYS_FIT, after: ids[9] },
    ]);
  });

  it('when the Revocations pane walks a long trail then it asks page by page, oldest first', async () => {
    const { fake, ids } = manyKeys(30);
    for (const id of ids) await fake.revokeKey(id);
    fake.calls.length = 0;
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('3');
    await ui.waitForFrame(/› \S+ \S+ key-001 [\s\S]*revocations 1-14 of many · PgDn next page/);
    await ui.press('pageDown');
    await ui.waitForFrame(/› \S+ \S+ key-015 [\s\S]*revocations 15-28 of many/);
    await ui.press('pageDown');
    await ui.waitForFrame(/› \S+ \S+ key-029 [\s\S]*revocations 29-30 of 30 · PgUp previous/);
    expect(fake.calls.filter((c) => c[0] === 'revocationPage').map((c) => c[1])).toEqual([
      { limit: REVOCATIONS_FIT },
      { limit: REVOCATIONS_FIT, after: ids[13] },
      { limit: REVOCATIONS_FIT, after: ids[27] },
    ]);
    // The Keys pane is not shown: its keys are not asked for.
    expect(keyPages(fake)).toEqual([]);
  });
});
