/**
 * `keys show` and `keys rotate` in process (`runCli` over inject): the whole outputs as a person
 * reads them and as --json prints them; a rotation at once and one with a grace, the old key
 * answering until the grace ends and 401 from that moment (before any timer), the new one with
 * the same name and limits; both in the audit trail and `revocations`; each refusal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { ok, refused } from '../helpers/cli-outcome.js';
import { BOT_SECRET, DEFAULT_SECRET } from '../helpers/counted-secrets.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const AT = new Date(T0).toISOString();
const SHOWN_ONCE = '  This secret is shown once and stored only as a hash. Save it now.\n\n';
const HI = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };

let d: Inproc;
let sim: Simulator;
let cli: InprocCli;
/** The secret of k00000000003, the first rotation's new key. */
let third: string;

beforeAll(async () => {
  d = await buildInproc();
  let url: string;
  ({ sim, url } = await startSim());
  cli = inprocCli(d.daemon.management);
  await cli.json('instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', url);
  await cli.json('instances', 'ready', 'gpu-1');
  await cli.json('keys', 'create', '--instance', 'gpu-1', '--name', 'notebook', '--rpm', '60', '--tpm', '20000');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('keys show', () => {
  it('one key as a person reads it, and as --json', async () => {
    expect((await d.chat(BOT_SECRET, HI)).status).toBe(200);
    const shown = await cli.run('keys', 'show', 'k00000000002');
    expect(shown).toEqual(
      ok(
        [
          'id           k00000000002',
          'name         notebook',
          'instance     gpu-1',
          'state        active',
          `hint         ${BOT_SECRET.slice(0, 6)}…${BOT_SECRET.slice(-4)}`,
          'default      no',
          'limits       rpm 60 · tpm 20000',
          `created      ${AT}`,
          `first used   ${AT}`,
          `last used    ${AT}`,
          'requests     1',
          'tokens       1 prompt, 8 completion (0 reasoning, 0 estimated)',
          'errors       0',
          'disconnects  0',
          '',
        ].join('\n'),
      ),
    );
    const json = await cli.json<Record<string, unknown>>('keys', 'show', 'k00000000002');
    expect(json).toEqual((await cli.json<Record<string, unknown>[]>('keys', 'list'))[1]);
    expect(await cli.run('keys', 'show', 'nope')).toEqual(
      refused(1, 'No key "nope". List keys with `ob-proxy keys list`.'),
    );
  });
});

/** The secret of the key made n-th by the daemon (countingSecrets): read from its output instead. */
function secretIn(stdout: string): string {
  return /ob_sk_\w+/.exec(stdout)![0];
}

describe('keys rotate', () => {
  it('at once: a new key, same name and limits; the old one revoked, reason rotated', async () => {
    const run = await cli.run('keys', 'rotate', 'k00000000002');
    const secret = (third = secretIn(run.stdout));
    expect(run).toEqual(
      ok(
        `Key "notebook" (id k00000000003) for instance gpu-1:\n\n  ${secret}\n\n${SHOWN_ONCE}` +
          'Limits: rpm 60 · tpm 20000.\n' +
          'It replaces key k00000000002, revoked now (reason rotated): it answers 401 from now on.\n',
      ),
    );
    expect((await d.chat(BOT_SECRET, HI)).status).toBe(401);
    expect((await d.chat(secret, HI)).status).toBe(200);
    expect(await cli.run('revocations')).toEqual(
      ok(
        [
          'REVOKED AT                KEY           NAME      INSTANCE  REASON',
          `${AT}  k00000000002  notebook  gpu-1     rotated`,
          '',
        ].join('\n'),
      ),
    );
    const events = d.daemon.ctx.lifecycle.registry.events.filter((e) => e.keyId !== undefined && e.seq > 4);
    expect(events.map((e) => [e.type, e.keyId, e.keyName, e.newKeyId, e.revokeAt, e.reason])).toEqual([
      ['key.created', 'k00000000003', 'notebook', undefined, undefined, undefined],
      ['key.rotated', 'k00000000002', 'notebook', 'k00000000003', AT, undefined],
      ['key.revoked', 'k00000000002', 'notebook', undefined, undefined, 'rotated'],
    ]);
    expect(d.logs.filter((l) => l.audit === 'key.rotated')).toMatchObject([
      { instance: 'gpu-1', key: 'k00000000002', newKey: 'k00000000003', revokeAt: AT },
    ]);
    expect(await cli.run('keys', 'rotate', 'k00000000002')).toEqual(
      refused(
        1,
        `Key k00000000002 was revoked at ${AT} (rotated); a revoked key is not rotated. Create a new key with \`ob-proxy keys create\`.`,
      ),
    );
  });

  it('with a grace: the old key serves until it ends and is refused from that moment, then revoked', async () => {
    const rotated = await cli.json<Record<string, unknown> & { secret: string; replaces: Record<string, unknown> }>(
      'keys',
      'rotate',
      'k00000000003',
      '--grace',
      '1h',
    );
    const until = new Date(T0 + 3_600_000).toISOString();
    const oldView = await cli.json<Record<string, unknown>>('keys', 'show', 'k00000000003');
    expect(oldView).toMatchObject({ status: 'active', revokeAt: until, revokedAt: null });
    expect(rotated).toEqual({
      ...(await cli.json<Record<string, unknown>>('keys', 'show', 'k00000000004')),
      secret: rotated.secret,
      replaces: oldView,
    });
    expect(rotated).toMatchObject({ name: 'notebook', limits: { rpm: 60, tpm: 20000, concurrency: null } });
    expect((await cli.run('keys', 'show', 'k00000000003')).stdout).toContain(
      `state        active until ${until}, then revoked (rotated)\n`,
    );
    expect((await cli.run('keys', 'list')).stdout).toContain(`active until ${until}`);
    expect(await cli.run('keys', 'rotate', 'k00000000003')).toEqual(
      refused(
        1,
        `Key k00000000003 was already rotated: it is revoked at ${until}. Rotate the key that replaced it instead (\`ob-proxy keys list --instance gpu-1\`).`,
      ),
    );
    const fifth = (await cli.json<{ secret: string }>('keys', 'rotate', 'k00000000004', '--grace', '2h')).secret;
    expect(fifth).toMatch(/^ob_sk_k00000000005_/);
    // Old and new both serve during the grace.
    for (const k of [third, rotated.secret, fifth]) expect((await d.chat(k, HI)).status).toBe(200);
    d.clock.advance(3_600_000 - 1);
    expect((await d.chat(third, HI)).status).toBe(200);
    d.clock.advance(1);
    // The moment it ends: refused before any timer ran, then revoked for good.
    const gone = await d.chat(third, HI);
    expect([gone.status, (gone.json as { error: { code: string } }).error.code]).toEqual([401, 'revoked_api_key']);
    await d.daemon.ctx.lifecycle.endDuePacks();
    const revoked = await cli.json<Record<string, unknown>>('keys', 'show', 'k00000000003');
    expect(revoked).toMatchObject({ status: 'revoked', revokedAt: until, revokeReason: 'rotated' });
    expect(revoked).not.toHaveProperty('revokeAt');
    for (const k of [rotated.secret, fifth]) expect((await d.chat(k, HI)).status).toBe(200);
  });

  it('refuses a bad --grace before asking the daemon, and asks first on a terminal', async () => {
    expect(await cli.run('keys', 'rotate', 'k00000000005', '--grace', '2 hours')).toEqual(
      refused(2, '--grace must be a duration up to 30 days (90s, 30m, 1h, 1d12h) or 0, got "2 hours".'),
    );
    expect(await cli.run('keys', 'rotate', 'k00000000005', '--grace', '31d')).toEqual(
      refused(2, '--grace must be a duration up to 30 days (90s, 30m, 1h, 1d12h) or 0, got "31d".'),
    );
    const asked: string[] = [];
    const tty = inprocCli(d.daemon.management, {
      ask: (q) => {
        asked.push(q);
        return Promise.resolve('n');
      },
    });
    expect(await tty.run('keys', 'rotate', 'k00000000005', '--grace', '30m')).toEqual(
      refused(1, 'Not confirmed: nothing was changed (pass --yes to skip the question).'),
    );
    expect(asked).toEqual([
      `Rotate key "notebook" (${(await cli.json<{ hint: string }>('keys', 'show', 'k00000000005')).hint}) of instance gpu-1? Its secret stops working in 30m. [y/N] `,
    ]);
    expect(await cli.json('keys', 'show', 'k00000000005')).not.toHaveProperty('revokeAt');
    expect(DEFAULT_SECRET).toMatch(/^ob_sk_k00000000001_/);
  });
});
