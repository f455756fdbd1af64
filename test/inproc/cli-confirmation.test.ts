/**
 * The CLI's confirmation on a terminal, in process (test/helpers/inproc-cli.ts): stop, fail,
 * terminate, remove and keys revoke ask first, naming what dies; "no" or an empty answer changes
 * nothing (exit 1), "yes" or --yes goes ahead; a secret is never in a question. Through a real
 * pseudo-terminal: test/e2e/admin-cli.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { ok, refused } from '../helpers/cli-outcome.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const AT = new Date(T0).toISOString();

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let cli: InprocCli;

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simUrl } = await startSim());
  cli = inprocCli(d.daemon.management);
  // A ready instance with two active keys: its default key and one more.
  await cli.json('instances', 'add', 'j1', '--model', MODEL, '--endpoint', simUrl);
  await cli.json('instances', 'ready', 'j1');
  await cli.json('keys', 'create', '--instance', 'j1', '--name', 'json-bot');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('confirmation on a terminal', () => {
  it('a "no" changes nothing (exit 1), a "yes" or --yes goes ahead; the question names what dies', async () => {
    const questions: string[] = [];
    let reply = 'n';
    const c = inprocCli(d.daemon.management, {
      ask: (q) => {
        questions.push(q);
        return Promise.resolve(reply);
      },
    });
    expect(await c.run('instances', 'stop', 'j1')).toEqual(
      refused(1, 'Not confirmed: nothing was changed (pass --yes to skip the question).'),
    );
    expect(((await d.manage('GET', '/v1/instances/j1')).json as { state: string }).state).toBe('ready');
    reply = 'y';
    expect(await c.run('instances', 'stop', 'j1')).toEqual(
      ok('Instance j1 is now stopped. All its keys are revoked.\n'),
    );
    expect(questions).toEqual([
      'Stop instance j1 (gemma4:26b) and revoke its 2 active keys for ever? [y/N] ',
      'Stop instance j1 (gemma4:26b) and revoke its 2 active keys for ever? [y/N] ',
    ]);
    expect(await c.run('instances', 'remove', 'j1', '--yes')).toEqual(
      ok('Removed instance j1. All its keys are revoked; they answer 404 deployment_not_found.\n'),
    );
    expect(questions).toHaveLength(2);
  });
});

describe('confirmation names what dies', () => {
  it('fail, terminate and remove ask too, and an empty answer is no; keys revoke names the key by name and hint', async () => {
    await cli.json('instances', 'add', 'conf', '--model', MODEL, '--endpoint', simUrl);
    await cli.json('instances', 'ready', 'conf');
    const questions: string[] = [];
    const c = inprocCli(d.daemon.management, {
      ask: (q) => {
        questions.push(q);
        return Promise.resolve('');
      },
    });
    for (const action of ['fail', 'terminate', 'remove']) {
      expect(await c.run('instances', action, 'conf'), action).toEqual(
        refused(1, 'Not confirmed: nothing was changed (pass --yes to skip the question).'),
      );
    }
    expect(questions).toEqual([
      'Mark instance conf (gemma4:26b) failed and revoke its 1 active key for ever? [y/N] ',
      'Terminate instance conf (gemma4:26b) for good and revoke its 1 active key for ever? [y/N] ',
      'Remove instance conf (gemma4:26b): revoke its 1 active key for ever (they answer 404) and forget the record? [y/N] ',
    ]);
    expect(await cli.json('instances', 'show', 'conf')).toMatchObject({ state: 'ready', activeKeys: 1 });

    const key = await cli.json<{ id: string; hint: string; secret: string }>(
      'keys',
      'create',
      '--instance',
      'conf',
      '--name',
      'key-0',
    );
    const yes = inprocCli(d.daemon.management, {
      ask: (q) => {
        questions.push(q);
        return Promise.resolve('yes');
      },
    });
    const revoked = await yes.run('keys', 'revoke', key.id);
    expect(revoked).toEqual(ok(`Revoked key ${key.id} ("key-0") of instance conf. It answers 401 from now on.\n`));
    expect(questions.at(-1)).toBe(`Revoke key "key-0" (${key.hint}) of instance conf for ever? [y/N] `);
    expect(questions.join('')).not.toContain(key.secret);
    // Nothing to ask about a key already revoked: the daemon's refusal says why.
    expect(await yes.run('keys', 'revoke', key.id)).toEqual(
      refused(1, `Key ${key.id} was already revoked at ${AT} (manual).`),
    );
    expect(questions).toHaveLength(4);
  });
});
