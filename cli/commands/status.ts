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

/** A count with its noun, singular or plural. */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/**
 * Whether every daemon refuses every revoked key, in words: the revocation points themselves
 * are PostgreSQL transaction ids (--json keeps them), which say nothing to a person.
 */
function revocationsSummary(v: NonNullable<StatusView['daemons']>): string {
  const live = v.daemons.filter((d) => d.state === 'live');
  const gone = v.daemons.filter((d) => d.state === 'gone');
  const lagging = live.filter((d) => d.revocationsBehind !== 0);
  const lines: string[] = [];
  const held = v.unwritten ?? [];
  if (v.newestRevocation === null) lines.push('No key has been revoked through this store yet.');
  else if (lagging.length === 0)
    lines.push(
      held.length === 0
        ? `Every live daemon (${live.length}) has applied every revocation: each refuses every revoked key.`
        : `Every live daemon (${live.length}) has applied every revocation the store holds: each refuses every key revoked there.`,
    );
  else
    lines.push(
      `${count(lagging.length, 'live daemon')} of ${live.length} ${lagging.length === 1 ? 'has' : 'have'} not applied every revocation yet (REVOCATIONS above): until ${lagging.length === 1 ? 'it does, it' : 'they do, they'} may still serve those keys. \`keys revoke --wait\` waits for them.`,
    );
  if (gone.length > 0)
    lines.push(
      `${count(gone.length, 'daemon')} gone (no report for longer than ${gone.length === 1 ? 'its' : 'their'} --max-stale): if ${gone.length === 1 ? 'it still runs, it refuses' : 'they still run, they refuse'} every key.`,
    );
  // Revocations the store refused: what no row or revocation point above can count.
  for (const h of held)
    lines.push(
      `Daemon ${h.id.slice(0, 8)}${h.self ? ' (this)' : ''} holds ${count(h.revocations, 'revocation')} the store refused${h.oldestAt === null ? '' : `, the oldest made at ${h.oldestAt}`}, in its memory and journal alone: it refuses ${h.revocations === 1 ? 'that key' : 'those keys'}, and the other daemons know nothing of ${h.revocations === 1 ? 'it' : 'them'} (each refuses every key once it has not written for --max-stale). ${h.revocations === 1 ? 'It is' : 'They are'} written once the store takes writes, while that daemon runs.`,
    );
  return lines.map((l) => `${l}\n`).join('');
}

/**
 * Every daemon of a shared store as it last reported: how many revocations and changes of the
 * store it had not applied then, and when it reported.
 */
function daemonsTable(deps: CliDeps, v: NonNullable<StatusView['daemons']>): string {
  const c = colours(deps.io);
  if (v.problem !== undefined) return `\n${c.red(`The daemons' reports cannot be read: ${v.problem}`)}\n`;
  const revocations = (n: number | null): string =>
    n === null ? 'not reported' : n === 0 ? 'all applied' : c.red(`${n} not applied`);
  const changes = (lag: number, at: number): string =>
    lag === 0 ? `up to date (${at})` : c.red(`${lag} behind (${at})`);
  return (
    '\nDaemons of the store, as each last reported:\n' +
    table([
      ['DAEMON', 'HOST', 'PID', 'STATE', 'REVOCATIONS', 'CHANGES', 'LAST REPORT'].map((h) => c.bold(h)),
      ...v.daemons.map((d) => [
        `${d.id.slice(0, 8)}${d.self ? ' (this)' : ''}`,
        d.host,
        String(d.pid),
        d.state === 'live' ? c.green('live') : c.red('gone'),
        revocations(d.revocationsBehind),
        changes(d.changeLag, d.appliedChange),
        `${seconds(d.reportAgeMs)} ago`,
      ]),
    ]) +
    revocationsSummary(v)
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
