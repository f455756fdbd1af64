import { Command } from 'commander';
import type { ChalkInstance } from 'chalk';
import { clipped, printable } from '../../src/printable.js';
import { validateTimestamp } from '../../src/domain/validate.js';
import { ObProxyError } from '../../src/errors.js';
import type { PackUsage, UsageCounts, UsageLine } from '../../src/wire/usage-report.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { type Io, colours, printJson, shown, table } from '../output.js';
import { type PageFlags, lineOut, nextLine, pageOf, withPageOptions } from '../list-options.js';
import { UsageError } from '../usage-error.js';
import { bucketsCsv, bucketsText, csvField } from './usage-buckets.js';

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `--since` (or `--until`): an ISO 8601 time with a zone, or a duration back from now (`24h`, `7d`, `-1d12h`). */
export function parseSince(raw: string, now: number, flag = '--since'): string {
  const duration = /^-?((?:\d+[smhdw])+)$/.exec(raw.trim());
  if (duration !== null) {
    let ms = 0;
    for (const [, n, unit] of duration[1]!.matchAll(/(\d+)([smhdw])/g)) ms += Number(n) * UNIT_MS[unit!]!;
    if (!Number.isSafeInteger(ms) || now - ms < 0)
      throw new UsageError(`${flag} ${raw} reaches before 1970: give a shorter duration or a time.`);
    return new Date(now - ms).toISOString();
  }
  try {
    return validateTimestamp(raw, flag);
  } catch (err) {
    if (!(err instanceof ObProxyError)) throw err;
    throw new UsageError(
      `${flag} must be an ISO 8601 time with a zone (2026-11-01T00:00:00Z) or a duration back from now (24h, 7d), got "${clipped(raw)}".`,
    );
  }
}

// REASONING and ESTIMATED are parts of the token columns before them (docs/cli.md).
const HEAD = [
  'REQUESTS',
  'PROMPT',
  'COMPLETION',
  'REASONING',
  'ESTIMATED',
  'ERRORS',
  'DISCONNECTS',
  'FIRST USE',
  'LAST USE',
];

function cells(u: UsageCounts): string[] {
  return [u.requests, u.promptTokens, u.completionTokens, u.reasoningTokens, u.estimatedTokens, u.errors, u.disconnects]
    .map(String)
    .concat(u.firstUsedAt ?? '-', u.lastUsedAt ?? '-');
}

const ROUTE_HEAD = ['KEY', 'ROUTE', 'REQUESTS', 'PROMPT', 'COMPLETION'];

/** One row per route used, in report order (the daemon's). */
function routeRows(first: string, u: UsageCounts): string[][] {
  // An older daemon sends no split.
  const byRoute = u.byRoute ?? {};
  return Object.keys(byRoute).map((route) => {
    const r = byRoute[route]!;
    return [first, printable(route), String(r.requests), String(r.promptTokens), String(r.completionTokens)];
  });
}

/**
 * The pack's usage by route under its table, narrow enough for 80 columns: per key and route
 * used, then the pack's total per route. Nothing when no key has a split (none used since it
 * was counted).
 */
function routeTable(p: PackUsage, c: ChalkInstance): string {
  const rows = p.keys.flatMap((k) => routeRows(k.id, k));
  if (rows.length === 0) return '';
  return `${c.bold('By route')}\n${table([ROUTE_HEAD.map((h) => c.bold(h)), ...rows, ...routeRows(c.bold('TOTAL'), p.total)])}`;
}

function packTitle(p: PackUsage): string {
  const what = [p.model, p.state, p.packEndsAt === null ? null : `pack ends ${p.packEndsAt}`]
    .filter((x) => x !== null)
    .join(', ');
  return `Instance ${p.instance}, deployment ${p.deployment} (${what})`;
}

function keyCount(packs: PackUsage[]): number {
  return packs.reduce((n, p) => n + p.keys.length, 0);
}

const CSV_HEAD =
  'instance,deployment,state,key,name,status,requests,prompt_tokens,completion_tokens,reasoning_tokens,estimated_tokens,errors,disconnects,first_used_at,last_used_at';

/**
 * `usage --all --csv`: a line per key, written as the daemon's lines come, so a report of a
 * million keys is never held whole; the values as stored (names not escaped for a terminal).
 */
async function usageCsv(io: Io, read: (onLine: (line: string) => void) => Promise<void>): Promise<void> {
  io.out(`${CSV_HEAD}\r\n`);
  await read((text) => {
    const l = JSON.parse(text) as UsageLine;
    const row = [
      l.instance,
      l.deployment,
      l.state,
      l.id,
      l.name,
      l.status,
      l.requests,
      l.promptTokens,
      l.completionTokens,
      l.reasoningTokens,
      l.estimatedTokens,
      l.errors,
      l.disconnects,
      l.firstUsedAt ?? '',
      l.lastUsedAt ?? '',
    ];
    io.out(`${row.map(csvField).join(',')}\r\n`);
  });
}

export function makeUsageCommand(deps: CliDeps): Command {
  return example(
    withPageOptions(withCommon(new Command('usage')), 'keys')
      .description('requests and tokens per key and per pack (a deployment of an instance): the receipt for the renter')
      .option('--instance <id>', 'only the packs of this instance id')
      .option('--key <key-id>', 'only this key')
      .option(
        '--since <time>',
        'only keys used at or after this time (ISO 8601, or a duration back: 24h, 7d); counters stay whole-life totals. With --by: the first bucket',
      )
      .option('--until <time>', 'with --by: the buckets that start before this time (ISO 8601, or a duration back)')
      .option('--by <size>', 'usage per key and hour, or per key and day (UTC): hour or day')
      .option(
        '--csv',
        'with --by: CSV for a spreadsheet or a billing system, one line per key and bucket; with --all: one line per key',
      )
      .action(async (o: UsageOptions) => {
        if (o.by !== undefined) {
          if (o.limit !== undefined || o.after !== undefined || o.all === true)
            throw new UsageError('--by reports every key of the filter: give it without --limit, --after or --all.');
          return byBuckets(deps, o);
        }
        if (o.until !== undefined || (o.csv === true && o.all !== true))
          throw new UsageError('--until goes with --by hour or --by day; --csv with --by or --all.');
        if (o.csv === true && o.json === true) throw new UsageError('Give either --csv or --json, not both.');
        const since = o.since === undefined ? undefined : parseSince(o.since, Date.now());
        const filter = { instance: o.instance, key: o.key, since };
        const page = pageOf(o);
        if (page === null) {
          if (o.all === true)
            return withClient(o, deps, (cl) =>
              o.csv === true
                ? usageCsv(deps.io, (out) => cl.usageLines(filter, out))
                : cl.usageLines(filter, lineOut(deps.io)),
            );
          return printJson(deps.io, await withClient(o, deps, (cl) => cl.usage(filter)));
        }
        const report = await withClient(o, deps, (cl) => cl.usagePage({ ...filter, ...page }));
        if (o.json === true) return printJson(deps.io, report);
        const c = colours(deps.io);
        const packs = shown(report.packs);
        const more = nextLine('ob-proxy usage', shown(report.next), page.limit, keyCount(packs));
        if (packs.length === 0)
          return deps.io.out(
            `${since === undefined ? 'No keys, so no usage.' : `No key was used since ${since}.`}\n${more}`,
          );
        deps.io.out(
          packs
            .map(
              (p) =>
                `${c.bold(packTitle(p))}\n${table([
                  ['KEY', 'NAME', 'STATUS', ...HEAD].map((h) => c.bold(h)),
                  ...p.keys.map((k) => [k.id, k.name, k.status, ...cells(k)]),
                  [c.bold('TOTAL'), `${p.keys.length} key${p.keys.length === 1 ? '' : 's'}`, '', ...cells(p.total)],
                ])}${routeTable(p, c)}`,
            )
            .join('\n'),
        );
        deps.io.out(more);
      }),
    'ob-proxy usage --instance gpu-1',
    'ob-proxy usage --limit 100 --after 3fA9kQ2mXz1B',
    'ob-proxy usage --all --csv > usage.csv',
    'ob-proxy usage --since 24h --json',
    'ob-proxy usage --key Xy12ab34Cd56',
    'ob-proxy usage --by day --since 2026-11-01T00:00:00Z --until 2026-12-01T00:00:00Z --csv > november.csv',
    'ob-proxy usage --by hour --since 24h --instance gpu-1',
  );
}

type UsageOptions = CommonOptions &
  PageFlags & {
    instance?: string;
    key?: string;
    since?: string;
    until?: string;
    by?: string;
    csv?: boolean;
  };

/** `usage --by hour|day`: the buckets, as a table, --json or --csv. */
async function byBuckets(deps: CliDeps, o: UsageOptions): Promise<void> {
  if (o.by !== 'hour' && o.by !== 'day')
    throw new UsageError(`--by must be hour or day, got "${clipped(o.by ?? '')}".`);
  if (o.csv === true && o.json === true) throw new UsageError('Give either --csv or --json, not both.');
  const now = Date.now();
  const since = o.since === undefined ? undefined : parseSince(o.since, now);
  const until = o.until === undefined ? undefined : parseSince(o.until, now, '--until');
  const by = o.by;
  const report = await withClient(o, deps, (cl) =>
    cl.usageBuckets({ instance: o.instance, key: o.key, since, until, by }),
  );
  if (o.json === true) return printJson(deps.io, report);
  deps.io.out(o.csv === true ? bucketsCsv(report) : bucketsText(deps, report));
}
