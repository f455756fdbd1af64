/**
 * Regression (management plane, names from the store): key names are checked (at most 64
 * characters) only when a key is made; a hand-edited or older store can hold any length. The
 * console's revoke question printed the whole name, so a 5,000-character one filled the dialog
 * past its box: the key's hint and instance, the "cannot be undone" warning and the y/n answers
 * were drawn over one another or not at all, while `y` still revoked. The name (and the hint)
 * are now cut to what a valid one can take, with an ellipsis: the question stays whole.
 */
import { expect, it } from 'vitest';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole, twoInstances } from './render-console.js';

it('a 5,000-character name: the revoke question keeps its hint, instance, warning and answers', async () => {
  const fake = new FakeDaemon();
  twoInstances(fake);
  const long = fake.addKey('gpu-1', `team-${'L'.repeat(5000)}`, {});
  const ui = renderConsole(fake);
  await ui.waitForFrame('› gpu-1');
  await ui.press('enter');
  await ui.waitForFrame('Keys of gpu-1');
  await ui.press('down');
  await ui.press('x');
  const frame = await ui.waitForFrame('Revoke key');
  // The question, read across its wrapped lines: the name cut to 128 cells, then the rest whole.
  const inBox = frame
    .split('\n')
    .filter((l) => l.startsWith('│'))
    .map((l) => l.slice(2, -2).trim())
    .join('');
  // Ink wraps the name mid-word: compared without any whitespace.
  const bare = (text: string): string => text.replace(/\s+/g, '');
    expect(bare(inBox)).toBe(
    bare(
    `Revoke key "team-${'L'.repeat(122)}…" (${long.hint}) of gpu-1? ` +
      'Every request with it is refused (401) at once, for ever. This cannot be undone. ' +
      'y revoke n / Esc keep it',
    ),
  );
  expect(frame.split('\n').length).toBeLessThanOrEqual(24);
  await ui.press('y');
  await ui.waitForFrame('revoked');
  expect(fake.keys.find((k) => k.id === long.id)?.status).toBe('revoked');
});
