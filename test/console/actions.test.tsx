/**
 * The console acts as the CLI does: stop and fail an instance, extend its pack, set a key's
 * limits, show a key, rotate it with and without grace. Each change that cannot be undone asks
 * the CLI's own question first (cli/questions.ts), and `n` changes nothing. Each test asserts
 * what the daemon ended with (the fake's state and the calls it received), not only the screen.
 */
import { describe, expect, it } from 'vitest';
import { DOOM, rotateQuestion } from '../../cli/questions.js';
import { FakeDaemon } from './fake-daemon.js';
import { flat, renderConsole, twoInstances } from './render-console.js';

function withTwoKeys(): FakeDaemon {
  const fake = new FakeDaemon();
  twoInstances(fake);
  fake.addKey('gpu-1', 'ci-bot', { createdAt: '2026-11-23T11:55:00.000Z' });
  fake.calls.length = 0;
  return fake;
}

/** The frame's words as one line, a box's borders taken out: a question wraps inside its box. */
function words(frame: string): string {
  return flat(frame.replace(/[│┌┐└┘─]/g, ' '));
}

/** The calls that change something (the console's reads left out). */
function changes(fake: FakeDaemon): unknown[][] {
  const reads = new Set(['status', 'listInstances', 'keyPage', 'revocationPage', 'follow', 'stats', 'getKey']);
  return fake.calls.filter((c) => !reads.has(c[0] as string));
}

describe('console: instance actions', () => {
  it('s asks the CLI’s question; n keeps the instance as it is; y stops it and revokes its keys', async () => {
    const fake = withTwoKeys();
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('s');
    const question = DOOM.stop(fake.instances[0]!);
    expect(question).toBe('Stop instance gpu-1 (gemma4:26b) and revoke its 2 active keys for ever?');
    expect(words(await ui.waitForFrame('y stop'))).toContain(question);
    await ui.press('n');
    await ui.waitForFrame('↑↓ move  Enter keys');
    expect(changes(fake)).toEqual([]);
    expect(fake.instances[0]!.state).toBe('ready');

    await ui.press('s');
    await ui.waitForFrame('y stop');
    await ui.press('y');
    expect(flat(await ui.waitForFrame('is now stopped. All its keys are revoked.'))).toContain('gpu-1 is now stopped');
    expect(changes(fake)).toEqual([['move', 'gpu-1', 'stop']]);
    expect(fake.instances[0]!.state).toBe('stopped');
    expect(fake.keys.filter((k) => k.instance === 'gpu-1').map((k) => [k.name, k.status, k.revokeReason])).toEqual([
      ['default', 'revoked', 'instance_stopped'],
      ['ci-bot', 'revoked', 'instance_stopped'],
    ]);
    // Stopped for good: a second s is refused by the console before any question.
    await ui.press('s');
    await ui.waitForFrame('gpu-1 is already stopped.');
    expect(changes(fake)).toEqual([['move', 'gpu-1', 'stop']]);
  });

  it('f asks first, then marks the instance failed', async () => {
    const fake = withTwoKeys();
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('f');
    expect(words(await ui.waitForFrame('y fail'))).toContain(
      'Mark instance gpu-1 (gemma4:26b) failed and revoke its 2 active keys for ever?',
    );
    await ui.press('y');
    await ui.waitForFrame('is now failed');
    expect(changes(fake)).toEqual([['move', 'gpu-1', 'fail']]);
    expect(fake.instances[0]!.state).toBe('failed');
    expect(fake.keys.every((k) => k.status === 'revoked' && k.revokeReason === 'instance_failed')).toBe(true);
  });

  it('e extends the pack: a duration from now, read as --pack-ends; a bad one is refused with the CLI’s words', async () => {
    const fake = withTwoKeys();
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('e');
    expect(flat(await ui.waitForFrame('Pack ends:'))).toContain('Extend the pack of gpu-1 · now ends 11-23 15:12 UTC');
    await ui.type('soon');
    await ui.press('enter');
    expect(words(await ui.waitForFrame('must be an ISO 8601 time'))).toContain(
      '--pack-ends must be an ISO 8601 time with a zone (2026-12-01T18:00:00Z) or a duration from now (+8h, +30d, +90m), got "soon".',
    );
    expect(changes(fake)).toEqual([]);
    await ui.press('\u0015');
    await ui.type('+30d');
    await ui.press('enter');
    await ui.waitForFrame('now ends 2026-12-23T12:00:00.000Z');
    expect(changes(fake)).toEqual([['extend', 'gpu-1', '2026-12-23T12:00:00.000Z']]);
    expect(fake.instances[0]!.packEndsAt).toBe('2026-12-23T12:00:00.000Z');
    expect(fake.keys.every((k) => k.status === 'active')).toBe(true);
  });

  it('the daemon’s refusal of an extension is shown, and the text kept for another try', async () => {
    const fake = withTwoKeys();
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('e');
    await ui.waitForFrame('Pack ends:');
    await ui.type('+1h');
    await ui.press('enter');
    // 13:00, sooner than 15:12: the fake refuses as the daemon does without --shorten.
    expect(words(await ui.waitForFrame((f) => words(f).includes('is sooner')))).toContain('Pack ends: +1h');
    expect(fake.instances[0]!.packEndsAt).toBe('2026-11-23T15:12:00.000Z');
    await ui.press('escape');
    await ui.waitForFrame('↑↓ move  Enter keys');
  });
});

async function openCiBot(fake: FakeDaemon) {
  const ui = renderConsole(fake);
  await ui.waitForFrame('› gpu-1');
  await ui.press('enter');
  await ui.waitForFrame('Keys of gpu-1');
  await ui.press('j');
  await ui.waitForFrame('› ci-bot');
  return ui;
}

describe('console: key actions', () => {
  it('Enter shows the key with the rows of `keys show`, never its secret', async () => {
    const fake = withTwoKeys();
    const ci = fake.keys.find((k) => k.name === 'ci-bot')!;
    const ui = await openCiBot(fake);
    await ui.press('enter');
    const frame = await ui.waitForFrame('as `ob-proxy keys show');
    for (const row of [
      `id           ${ci.id}`,
      'name         ci-bot',
      'instance     gpu-1',
      'state        active',
      `hint         ${ci.hint}`,
      'default      no',
      'limits       none',
      'created      2026-11-23T11:55:00.000Z',
      'last used    -',
      'requests     0',
      'tokens       0 prompt, 0 completion (0 reasoning, 0 estimated)',
    ])
      expect(frame).toContain(row);
    expect(frame).not.toContain('ob_sk_' + ci.id);
    expect(fake.calls.filter((c) => c[0] === 'getKey')).toEqual([['getKey', ci.id]]);
    await ui.press('escape');
    await ui.waitForFrame('› ci-bot');
  });

  it('l sets the key’s limits as `keys limit` does: a limit left out is kept, none removes one', async () => {
    const fake = withTwoKeys();
    const ci = fake.keys.find((k) => k.name === 'ci-bot')!;
    ci.limits = { rpm: 60, tpm: null, concurrency: 4 };
    const ui = await openCiBot(fake);
    await ui.press('l');
    expect(flat(await ui.waitForFrame('Limits: rpm=60'))).toContain('Limits: rpm=60 tpm=none concurrency=4');
    await ui.press('\u0015');
    await ui.type('rpm=0');
    await ui.press('enter');
    await ui.waitForFrame('--rpm must be a whole number from 1');
    expect(changes(fake)).toEqual([]);
    await ui.press('\u0015');
    await ui.type('tpm=10000 concurrency=none');
    await ui.press('enter');
    await ui.waitForFrame('Limits of "ci-bot": rpm 60 · tpm 10000.');
    expect(changes(fake)).toEqual([['setKeyLimits', ci.id, { tpm: 10000, concurrency: null }]]);
    expect(ci.limits).toEqual({ rpm: 60, tpm: 10000, concurrency: null });
  });

  it('o rotates at once: the CLI’s question, the new secret shown once, the old key revoked', async () => {
    const fake = withTwoKeys();
    const ci = fake.keys.find((k) => k.name === 'ci-bot')!;
    ci.limits = { rpm: 60, tpm: null, concurrency: null };
    const ui = await openCiBot(fake);
    await ui.press('o');
    await ui.waitForFrame('Grace:');
    await ui.press('enter');
    const asked = words(await ui.waitForFrame('y rotate'));
    expect(asked).toContain(rotateQuestion(ci, undefined));
    expect(asked).toContain('Its secret stops working now.');
    await ui.press('y');
    const box = await ui.waitForFrame('shown once');
    const fresh = fake.issued.at(-1)!;
    expect(box).toContain(fresh);
    expect(changes(fake)).toEqual([['rotateKey', ci.id, undefined]]);
    expect([ci.status, ci.revokeReason]).toEqual(['revoked', 'rotated']);
    const replacement = fake.keys.find((k) => fake.issued.at(-1)!.includes(k.id))!;
    expect([replacement.name, replacement.status, replacement.limits]).toEqual([
      'ci-bot',
      'active',
      { rpm: 60, tpm: null, concurrency: null },
    ]);
    await ui.press('enter');
    const after = await ui.waitForFrame('"ci-bot" rotated: its old key answers 401 from now on.');
    expect(after).not.toContain(fresh);
  });

  it('o with a grace: the old key keeps serving until it ends; n at the question changes nothing', async () => {
    const fake = withTwoKeys();
    const ci = fake.keys.find((k) => k.name === 'ci-bot')!;
    const ui = await openCiBot(fake);
    await ui.press('o');
    await ui.waitForFrame('Grace:');
    await ui.type('31d');
    await ui.press('enter');
    await ui.waitForFrame('--grace must be a duration up to 30 days');
    await ui.press('\u0015');
    await ui.type('1h');
    await ui.press('enter');
    expect(words(await ui.waitForFrame('y rotate'))).toContain('Its secret stops working in 1h.');
    await ui.press('n');
    await ui.waitForFrame('› ci-bot');
    expect(changes(fake)).toEqual([]);

    await ui.press('o');
    await ui.waitForFrame('Grace:');
    await ui.type('1h');
    await ui.press('enter');
    await ui.waitForFrame('y rotate');
    await ui.press('y');
    await ui.waitForFrame('shown once');
    expect(changes(fake)).toEqual([['rotateKey', ci.id, 3600]]);
    expect([ci.status, ci.revokeAt]).toEqual(['active', '2026-11-23T13:00:00.000Z']);
    await ui.press('enter');
    await ui.waitForFrame('"ci-bot" rotated: its old key serves until 11-23 13:00 UTC.');
  });

  it('a revoked key is neither limited nor rotated', async () => {
    const fake = withTwoKeys();
    const ci = fake.keys.find((k) => k.name === 'ci-bot')!;
    await fake.revokeKey(ci.id);
    fake.calls.length = 0;
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('Keys of gpu-1');
    await ui.press('j');
    await ui.waitForFrame('› ci-bot');
    await ui.press('o');
    await ui.waitForFrame('"ci-bot" is revoked.');
    await ui.press('l');
    await ui.waitForFrame('"ci-bot" is revoked.');
    expect(changes(fake)).toEqual([]);
  });
});
