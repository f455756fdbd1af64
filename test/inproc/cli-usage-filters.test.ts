/**
 * `ob-proxy usage` in process (test/helpers/inproc-cli.ts): --key, --instance and --since select
 * the keys shown, the totals add up what is shown, and a bad --since or an unknown key is
 * refused. The report after real traffic through the real daemon: test/e2e/usage-report.test.ts.
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
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('ob-proxy usage selects', () => {
  it('--key, --instance and --since select keys; totals add up what is shown; refusals', async () => {
    await cli.json('instances', 'add', 'use-a', '--model', MODEL, '--endpoint', simUrl);
    const first = (await cli.json<{ defaultKey: { id: string; secret: string } }>('instances', 'ready', 'use-a'))
      .defaultKey;
    const bot = await cli.json<{ id: string; secret: string }>(
      'keys',
      'create',
      '--instance',
      'use-a',
      '--name',
      'bot',
    );
    const idle = await cli.json<{ id: string }>('keys', 'create', '--instance', 'use-a', '--name', 'idle');
    for (const secret of [first.secret, first.secret, bot.secret]) {
      expect((await d.chat(secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
    }
    const used = (requests: number): Record<string, unknown> => ({
      requests,
      promptTokens: requests,
      completionTokens: 8 * requests,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: AT,
      lastUsedAt: AT,
      byRoute: { chat: { requests, promptTokens: requests, completionTokens: 8 * requests } },
    });
    const unused = {
      requests: 0,
      promptTokens: 0,
      completionTokens: 0,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: null,
      lastUsedAt: null,
      byRoute: {},
    };
    const pack = {
      instance: 'use-a',
      deployment: d.daemon.ctx.lifecycle.registry.instances.get('use-a')!.deployment,
      model: MODEL,
      state: 'ready',
      packEndsAt: null,
    };
    const rows = {
      first: { id: first.id, name: 'default', status: 'active', ...used(2) },
      bot: { id: bot.id, name: 'bot', status: 'active', ...used(1) },
      idle: { id: idle.id, name: 'idle', status: 'active', ...unused },
    };
    expect(await cli.json('usage', '--instance', 'use-a')).toEqual({
      since: null,
      packs: [{ ...pack, keys: [rows.first, rows.bot, rows.idle], total: used(3) }],
    });
    expect(await cli.json('usage', '--key', bot.id)).toEqual({
      since: null,
      packs: [{ ...pack, keys: [rows.bot], total: used(1) }],
    });
    // --since: keys used at or after the time; the unused key drops out, counters stay whole.
    const since = await cli.json<{ since: string; packs: { instance: string; keys: unknown[] }[] }>(
      'usage',
      '--since',
      '2026-11-23T11:00:00Z',
    );
    expect(since.since).toBe('2026-11-23T11:00:00.000Z');
    expect(since.packs.find((p) => p.instance === 'use-a')!.keys).toEqual([rows.first, rows.bot]);
    expect(await cli.json('usage', '--since', '2099-01-01T00:00:00Z')).toEqual({
      since: '2099-01-01T00:00:00.000Z',
      packs: [],
    });
    expect(await cli.run('usage', '--since', '2099-01-01T00:00:00Z')).toEqual(
      ok('No key was used since 2099-01-01T00:00:00.000Z.\n'),
    );
    expect(await cli.run('usage', '--since', 'yesterday')).toEqual(
      refused(
        2,
        '--since must be an ISO 8601 time with a zone (2026-11-01T00:00:00Z) or a duration back from now (24h, 7d), got "yesterday".',
      ),
    );
    expect(await cli.run('usage', '--key', 'nope')).toEqual(
      refused(1, 'No key with id nope. List keys with `ob-proxy keys list`.'),
    );
  });
});
