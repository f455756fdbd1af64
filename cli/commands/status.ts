import { Command } from 'commander';
import type { StatusView } from '../../src/wire/views.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { colours, printJson, shown, table } from '../output.js';

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** The store line: a file this daemon alone writes, or a shared store and how this daemon stands with it. */
function storeLine(deps: CliDeps, s: StatusView): string {
  const c = colours(deps.io);
  const sync = s.storeSync;
  if (sync == null) return `${s.store} (this daemon only)`;
  const state =
    sync.state === 'in_sync'
      ? c.green('in sync')
      : c.red(
          `stale: out of sync for longer than --max-stale (${seconds(sync.maxStaleMs)}), every key refused with 503`,
        );
  const chores = sync.holdsChores
    ? "this daemon does the cluster's chores (ending packs)"
    : "another daemon does the cluster's chores";
  // Why, as the database said: a daemon that reads but cannot write is not in sync either.
  const problem = sync.problem == null ? '' : `; ${c.red(sync.problem)}`;
  return `${sync.location} (shared): ${state}; last in sync ${seconds(sync.lastSyncAgeMs)} ago (${sync.lastSyncAt})${problem}; ${chores}`;
}

/**
 * Every daemon of a shared store as it last reported: its revocation point and how many
 * revocations it had not applied then, its change number and lag, and when it reported.
 */
function daemonsTable(deps: CliDeps, v: NonNullable<StatusView['daemons']>): string {
  const c = colours(deps.io);
  if (v.problem !== undefined) return `\n${c.red(`The daemons' reports cannot be read: ${v.problem}`)}\n`;
  const behind = (n: number | null): string => (n === null ? '-' : n === 0 ? '0' : c.red(String(n)));
  return (
    `\nDaemons of the store (newest revocation: ${v.newestRevocation ?? 'none'}):\n` +
    table([
      ['DAEMON', 'HOST', 'PID', 'STATE', 'REVOCATIONS APPLIED', 'BEHIND', 'CHANGE', 'BEHIND', 'LAST REPORT'].map((h) =>
        c.bold(h),
      ),
      ...v.daemons.map((d) => [
        `${d.id.slice(0, 8)}${d.self ? ' (this)' : ''}`,
        d.host,
        String(d.pid),
        d.state === 'live' ? c.green('live') : c.red('gone'),
        d.appliedRevocations ?? '-',
        behind(d.revocationsBehind),
        String(d.appliedChange),
        behind(d.changeLag),
        `${seconds(d.reportAgeMs)} ago`,
      ]),
    ])
  );
}

export function makeStatusCommand(deps: CliDeps): Command {
  return example(
    withCommon(new Command('status'))
      .description('the daemon: version, addresses, store (and, for a shared store, whether it is in sync)')
      .action(async (o: CommonOptions) => {
        const status = await withClient(o, deps, (cl) => cl.status());
        if (o.json === true) return printJson(deps.io, status);
        const s = shown(status);
        const c = colours(deps.io);
        deps.io.out(
          table([
            [c.bold('daemon'), `ob-proxy ${s.version}, pid ${s.pid}, since ${s.startedAt}`],
            [c.bold('serving'), s.baseUrl],
            [c.bold('socket'), s.socket],
            [c.bold('models'), s.models.join(', ')],
            [c.bold('store'), storeLine(deps, s)],
          ]),
        );
        if (s.daemons?.shared === true) deps.io.out(daemonsTable(deps, s.daemons));
      }),
    'ob-proxy status',
    'ob-proxy status --json',
  );
}
