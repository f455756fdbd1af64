/**
 * `ob-proxy instances alias` in process (`runCli` over inject, test/helpers/inproc-cli.ts): aliases
 * added, taken away, cleared and shown, the whole outputs as a person reads them and as --json
 * prints the instance; `instances list` and `show` with them; each refusal's line and exit code.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ok, refused } from '../helpers/cli-outcome.js';
import { type Inproc, MODEL, T0, buildInproc } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const AT = new Date(T0).toISOString();

let d: Inproc;
let cli: InprocCli;

beforeAll(async () => {
  d = await buildInproc();
  cli = inprocCli(d.daemon.management);
  await d.daemon.ctx.lifecycle.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:9' });
  await d.daemon.ctx.lifecycle.addInstance({ id: 'gpu-2', model: MODEL });
});

afterAll(async () => {
  await d?.close();
});

describe('instances alias', () => {
  it('adds, shows, takes away and clears, printing the aliases after each', async () => {
    expect(await cli.run('instances', 'alias', 'gpu-1')).toEqual(
      ok('Instance gpu-1 has no aliases: its keys send gemma4:26b as model.\n'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1', 'claude-sonnet-4-5', 'claude-haiku-4-5')).toEqual(
      ok('Keys of gpu-1 may send as model gemma4:26b or its aliases: claude-sonnet-4-5, claude-haiku-4-5.\n'),
    );
    // Given again: nothing changes.
    expect(await cli.run('instances', 'alias', 'gpu-1', 'claude-haiku-4-5')).toEqual(
      ok('Keys of gpu-1 may send as model gemma4:26b or its aliases: claude-sonnet-4-5, claude-haiku-4-5.\n'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1', 'gpt-4o', '--remove', 'claude-haiku-4-5')).toEqual(
      ok('Keys of gpu-1 may send as model gemma4:26b or its aliases: claude-sonnet-4-5, gpt-4o.\n'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1')).toEqual(
      ok('Keys of gpu-1 may send as model gemma4:26b or its aliases: claude-sonnet-4-5, gpt-4o.\n'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1', '--clear', 'qwen3.6:27b')).toEqual(
      ok('Keys of gpu-1 may send as model gemma4:26b or its aliases: qwen3.6:27b.\n'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1', '--clear')).toEqual(
      ok('Instance gpu-1 has no aliases: its keys send gemma4:26b as model.\n'),
    );
    // Only the calls that change something are changes: one per command that gave aliases.
    const events = d.daemon.ctx.lifecycle.registry.events.filter((e) => e.type === 'instance.aliased');
    expect(events.map((e) => e.aliases)).toEqual([
      ['claude-sonnet-4-5', 'claude-haiku-4-5'],
      ['claude-sonnet-4-5', 'gpt-4o'],
      ['qwen3.6:27b'],
      [],
    ]);
  });

  it('--json prints the instance after the change', async () => {
    const inst = await cli.json<Record<string, unknown>>('instances', 'alias', 'gpu-2', 'claude-sonnet-4-5');
    expect(inst).toEqual({
      id: 'gpu-2',
      model: MODEL,
      aliases: ['claude-sonnet-4-5'],
      endpoint: null,
      state: 'pending',
      packEndsAt: null,
      upstreamTokenFile: null,
      activeKeys: 0,
      createdAt: AT,
      updatedAt: AT,
      health: null,
    });
    expect(await cli.json('instances', 'alias', 'gpu-2')).toEqual(inst);
    expect(await cli.json('instances', 'show', 'gpu-2')).toEqual(inst);
  });

  it('list shows the first three and how many more; show gives them all', async () => {
    await cli.run('instances', 'alias', 'gpu-2', 'a-1', 'a-2', 'a-3', 'a-4');
    expect(await cli.run('instances', 'list')).toEqual(
      ok(
        [
          'ID     MODEL       ALIASES                           STATE    HEALTH  KEYS  ENDPOINT            PACK ENDS',
          'gpu-1  gemma4:26b  -                                 pending  -       0     http://127.0.0.1:9  -',
          'gpu-2  gemma4:26b  claude-sonnet-4-5, a-1, a-2 (+2)  pending  -       0     -                   -',
          '',
        ].join('\n'),
      ),
    );
    expect(await cli.run('instances', 'show', 'gpu-2')).toEqual(
      ok(
        [
          'id           gpu-2',
          'model        gemma4:26b',
          'aliases      claude-sonnet-4-5, a-1, a-2, a-3, a-4',
          'state        pending',
          'endpoint     -',
          'health       -',
          'pack ends    -',
          'active keys  0',
          `created      ${AT}`,
          `updated      ${AT}`,
          '',
        ].join('\n'),
      ),
    );
  });

  it('refusals: one line on stderr, exit 1 from the daemon and 2 for the command line', async () => {
    expect(await cli.run('instances', 'alias', 'gpu-1', 'gemma4:26b')).toEqual(
      refused(
        1,
        '"gemma4:26b" is the model of instance gpu-1 itself: its keys send it already. An alias names another model id.',
      ),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1', 'claude sonnet')).toEqual(
      refused(
        1,
        'Alias "claude sonnet" is not a model id: 1-200 characters: letters, digits, and . _ : / @ + - (not first). Give the id the agent sends as model, e.g. claude-sonnet-4-5.',
      ),
    );
    expect(await cli.run('instances', 'alias', 'gpu-1', '--remove', 'nope')).toEqual(
      refused(1, 'Instance gpu-1 has no alias "nope"; it has none. Nothing was changed.'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-9', 'x')).toEqual(
      refused(1, 'No instance "gpu-9". List instances with `ob-proxy instances list`.'),
    );
    expect(await cli.run('instances', 'alias', 'gpu-2', '--clear', '--remove', 'a-1')).toEqual(
      refused(2, 'Give either --clear or --remove, not both: --clear takes every alias away.'),
    );
    await d.daemon.ctx.lifecycle.halt('gpu-1', 'terminate');
    expect(await cli.run('instances', 'alias', 'gpu-1', 'x')).toEqual(
      refused(
        1,
        'Instance "gpu-1" is terminated; its aliases can no longer change. Add a new instance to serve under them.',
      ),
    );
  });
});
