import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { waitTimeoutMs } from '../src/config-resolve.js';
import { ObProxyError, obError } from '../src/errors.js';
import type { ConfirmationView, DaemonView } from '../src/services/revocation-confirmation.js';
import { type CliDeps, settingOption } from './common.js';
import type { DaemonClient } from './daemon-client.js';
import { UsageError } from './usage-error.js';

export interface WaitOptions {
  wait?: boolean;
  waitTimeout?: string;
}

/** How often the daemons' reports are read while waiting: each daemon writes its row as soon as it applied a revocation. */
const POLL_MS = 100;

/** `--wait` and its bound, on every command that revokes. */
export function withWaitOptions(cmd: Command): Command {
  return cmd
    .option('--wait', 'return once every live daemon of the store has confirmed it refuses the keys')
    .addOption(settingOption('waitTimeout'));
}

/** The bound, read (and refused as a usage error) before anything is revoked. */
export function waitBound(o: WaitOptions, deps: CliDeps): number | null {
  if (o.wait !== true) {
    if (o.waitTimeout !== undefined) throw new UsageError('--wait-timeout goes with --wait.');
    return null;
  }
  try {
    return waitTimeoutMs(o, deps.io.env);
  } catch (err) {
    throw err instanceof ObProxyError ? new UsageError(err.message) : err;
  }
}

export interface Confirmation {
  view: ConfirmationView;
  waitedMs: number;
}

/** Asks the daemon until every live daemon confirms or `timeoutMs` has passed; the last answer either way. */
export async function waitConfirmed(
  cl: DaemonClient,
  target: { keys?: readonly string[]; instance?: string },
  timeoutMs: number,
): Promise<Confirmation> {
  const start = Date.now();
  for (;;) {
    const view = await cl.confirmations(target);
    const waitedMs = Date.now() - start;
    if (view.confirmed || waitedMs >= timeoutMs) return { view, waitedMs };
    await sleep(Math.min(POLL_MS, timeoutMs - waitedMs));
  }
}

/** `--json`: the daemon's answer and how long the command waited for it. */
export function confirmationJson(c: Confirmation): ConfirmationView & { waitedMs: number } {
  return { ...c.view, waitedMs: c.waitedMs };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** A daemon as a person finds it: its host and pid, and the start of its name in the store. */
export function daemonName(d: DaemonView): string {
  return `${d.id.slice(0, 8)} (${d.host}, pid ${d.pid}${d.self ? ', this daemon' : ''})`;
}

/** What a daemon last reported: how many revocations and changes it had not applied, when. */
export function lastReport(d: DaemonView): string {
  const point =
    d.appliedRevocations === null || d.revocationsBehind === null
      ? 'reports no revocation point (an older ob-proxy, or no read yet)'
      : d.revocationsBehind === 0
        ? 'had applied every revocation'
        : `had not applied ${d.revocationsBehind} revocation${d.revocationsBehind === 1 ? '' : 's'}`;
  return `${point}, change ${d.appliedChange} (${d.changeLag} behind), last report ${seconds(d.reportAgeMs)} ago`;
}

/** The line said after a revocation with --wait that was confirmed. */
export function confirmedLine(c: Confirmation): string {
  const v = c.view;
  if (!v.shared) return 'Confirmed: this daemon is the only one of its store.\n';
  const live = v.daemons.filter((d) => d.state === 'live');
  const gone = v.daemons.filter((d) => d.state === 'gone');
  return (
    `Confirmed by ${live.length === 1 ? 'the 1 live daemon' : `all ${live.length} live daemons`} of the store in ${seconds(c.waitedMs)}.\n` +
    (gone.length === 0
      ? ''
      : `Gone (no report for longer than their --max-stale, so they refuse every key if they still run): ${gone.map(daemonName).join(', ')}.\n`)
  );
}

/** The refusal of a --wait whose bound passed: who has not confirmed, and what each last said. */
export function unconfirmedError(c: Confirmation, timeoutMs: number): ObProxyError {
  const v = c.view;
  const lagging = v.daemons.filter((d) => d.state === 'live' && d.confirmed !== true);
  const gone = v.daemons.filter((d) => d.state === 'gone');
  const parts: string[] = [];
  if (v.notShared.length > 0)
    parts.push(
      `the store has not taken the revocation of ${v.notShared.join(', ')} yet (this daemon refuses them, and writes them once it can)`,
    );
  if (lagging.length > 0)
    parts.push(
      `${lagging.length} of ${v.daemons.length - gone.length} live daemon(s) did not confirm: ${lagging
        .map((d) => `${daemonName(d)} ${lastReport(d)}`)
        .join('; ')}`,
    );
  if (gone.length > 0)
    parts.push(
      `gone (no report for longer than their --max-stale, so they refuse every key if they still run): ${gone
        .map((d) => `${daemonName(d)} last report ${seconds(d.reportAgeMs)} ago`)
        .join('; ')}`,
    );
  return obError('revocation_unconfirmed', {
    message: `The revocation is made, but not confirmed within ${seconds(timeoutMs)} (--wait-timeout): ${parts.join('. ')}. Follow them with \`ob-proxy status\`.`,
  });
}
