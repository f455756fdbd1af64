/**
 * `ob-proxy usage --by hour|day` in process: usage per key and hour (or day) as a person reads
 * it, as --json and as --csv, with what this daemon has counted and not written yet in its hour;
 * --since and --until bound the buckets; the buckets and the CSV sum to the keys' whole-life
 * counters; each usage error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { hourStart } from '../../src/domain/usage-buckets.js';
import type { UsageBucketsReport } from '../../src/wire/usage-buckets-report.js';
import type { UsageReport } from '../../src/wire/usage-report.js';
import { ok, refused } from '../helpers/cli-outcome.js';
import { BOT_SECRET, DEFAULT_SECRET } from '../helpers/counted-secrets.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const HOUR = 3_600_000;
const H0 = new Date(T0).toISOString();
const H1 = new Date(T0 + HOUR).toISOString();
const HI = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };

let d: Inproc;
let sim: Simulator;
let cli: InprocCli;

/** What the flusher does at an hour's start: what was counted, written in the hour that ends. */
async function flushAt(ms: number): Promise<void> {
  const ctx = d.daemon.ctx;
  await ctx.lifecycle.flushUsage(ctx.usage.takeDirty(hourStart(ms - 1)));
}

beforeAll(async () => {
  d = await buildInproc();
  let url: string;
  ({ sim, url } = await startSim());
  cli = inprocCli(d.daemon.management);
  await cli.json('instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', url);
  await cli.json('instances', 'ready', 'gpu-1');
  await cli.json('keys', 'create', '--instance', 'gpu-1', '--name', 'note,book');
  for (const k of [DEFAULT_SECRET, BOT_SECRET, BOT_SECRET]) expect((await d.chat(k, HI)).status).toBe(200);
  d.clock.advance(HOUR);
  await flushAt(d.clock.now());
  // Counted in the next hour, not written yet.
  expect((await d.chat(BOT_SECRET, HI)).status).toBe(200);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('usage --by', () => {
  it('by the hour: a row per key and hour, written or not yet, then the total', async () => {
    expect(await cli.run('usage', '--by', 'hour')).toEqual(
      ok(
        [
          'Usage by the hour, the first use to now (UTC)',
          'START                     KEY           NAME       INSTANCE  REQUESTS  PROMPT  COMPLETION  ERRORS',
          `${H0}  k00000000001  default    gpu-1     1         1       8           0`,
          `${H0}  k00000000002  note,book  gpu-1     2         2       16          0`,
          `${H1}  k00000000002  note,book  gpu-1     1         1       8           0`,
          'TOTAL                                                        4         4       32          0',
          '',
        ].join('\n'),
      ),
    );
  });

  it('by the day, bounded, as JSON and CSV; they sum to the whole-life counters', async () => {
    const day = await cli.json<UsageBucketsReport>('usage', '--by', 'day', '--key', 'k00000000002');
    expect(day).toEqual({
      by: 'day',
      since: null,
      until: null,
      rows: [
        {
          start: '2026-11-23T00:00:00.000Z',
          size: 'day',
          keyId: 'k00000000002',
          name: 'note,book',
          instance: 'gpu-1',
          requests: 3,
          promptTokens: 3,
          completionTokens: 24,
          errors: 0,
        },
      ],
      total: { requests: 3, promptTokens: 3, completionTokens: 24, errors: 0 },
    });
    const whole = await cli.json<UsageReport>('usage');
    const keys = whole.packs.flatMap((p) => p.keys);
    const csv = await cli.run('usage', '--by', 'hour', '--csv');
    expect(csv).toEqual(
      ok(
        [
          'start,size,key,name,instance,requests,prompt_tokens,completion_tokens,errors',
          `${H0},hour,k00000000001,default,gpu-1,1,1,8,0`,
          `${H0},hour,k00000000002,"note,book",gpu-1,2,2,16,0`,
          `${H1},hour,k00000000002,"note,book",gpu-1,1,1,8,0`,
          '',
        ].join('\r\n'),
      ),
    );
    for (const k of keys) {
      const lines = csv.stdout.split('\r\n').filter((l) => l.includes(`,${k.id},`));
      const sum = (col: number): number =>
        lines.reduce((n, l) => n + Number(l.split(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/)[col]), 0);
      expect([sum(5), sum(6), sum(7), sum(8)]).toEqual([k.requests, k.promptTokens, k.completionTokens, k.errors]);
    }
    expect(
      await cli.json('usage', '--by', 'hour', '--since', H1, '--until', new Date(T0 + 2 * HOUR).toISOString()),
    ).toMatchObject({
      since: H1,
      rows: [{ start: H1, keyId: 'k00000000002', requests: 1 }],
    });
    expect(await cli.run('usage', '--by', 'hour', '--until', H0)).toEqual(
      ok(`No usage by the hour from the first use to ${H0}.\n`),
    );
  });

  it('usage errors', async () => {
    expect(await cli.run('usage', '--until', '1h')).toEqual(
      refused(2, '--until goes with --by hour or --by day; --csv with --by or --all.'),
    );
    expect(await cli.run('usage', '--csv')).toEqual(
      refused(2, '--until goes with --by hour or --by day; --csv with --by or --all.'),
    );
    expect(await cli.run('usage', '--by', 'week')).toEqual(refused(2, '--by must be hour or day, got "week".'));
    expect(await cli.run('usage', '--by', 'day', '--csv', '--json')).toEqual(
      refused(2, 'Give either --csv or --json, not both.'),
    );
    expect(await cli.run('usage', '--by', 'day', '--until', 'soon')).toEqual(
      refused(
        2,
        '--until must be an ISO 8601 time with a zone (2026-11-01T00:00:00Z) or a duration back from now (24h, 7d), got "soon".',
      ),
    );
  });
});
