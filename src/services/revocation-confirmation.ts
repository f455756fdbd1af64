/**
 * Whether every daemon of a shared store refuses a set of revoked keys, from what each daemon
 * last wrote in its row (docs/scale-out.md, "Confirmed revocations"). A daemon reports the point
 * up to which it has applied revocations; a revocation is confirmed by a daemon once that point
 * is past it. A daemon that has not reported for longer than its own --max-stale is gone: if it
 * still runs, it refuses every key (it has not written to the store for that long, docs/contract.md
 * §4), so it is named, apart, and does not hold a confirmation back.
 */

/** One daemon's row as the store read it. */
export interface DaemonReport {
  /** The daemon's name in the store (a UUID drawn at start). */
  id: string;
  /** The daemon answering this question. */
  self: boolean;
  host: string;
  pid: number;
  startedAt: string;
  /** When it last wrote its row, and how long ago (the database's clock). */
  reportedAt: string;
  reportAgeMs: number;
  /** The last change number it applied, and how many changes the store has past it. */
  appliedChange: number;
  changeLag: number;
  /** Its revocation point: the xmax of its last read of the revocations (null: it has read none). */
  appliedRevocations: string | null;
  /** Revocations in the store it had not applied when it reported (null: it reports no point). */
  revocationsBehind: number | null;
  /** Of the keys asked about, how many it had not applied (null: it reports no point). */
  pending: number | null;
  lastInSyncAt: string | null;
  /** Its --max-stale (null: an older version, which does not say). */
  maxStaleMs: number | null;
}

export interface DaemonReports {
  daemons: DaemonReport[];
  /** The newest revocation's point (null: none yet). */
  newestRevocation: string | null;
  /** Keys asked about whose revocation the store has not taken yet: no daemon can confirm them. */
  notShared: string[];
  /** The running daemons that hold revocations the store refused (absent: a store that does not say). */
  unwritten?: UnwrittenHold[];
}

/**
 * Revocations a running daemon holds that the store refused (a database turned read-only): in
 * its memory and journal only, so no other daemon refuses those keys for them; they are written
 * once the store takes writes, while that daemon runs.
 */
export interface UnwrittenHold {
  /** The daemon's name in the store, as in `daemons` (it may have no row: started since). */
  id: string;
  self: boolean;
  revocations: number;
  /** When the oldest of them was made (null: not known). */
  oldestAt: string | null;
}

/** The --max-stale a row that does not say is taken to have (the default). */
export const DEFAULT_MAX_STALE_MS = 30_000;

export type DaemonState = 'live' | 'gone';

/** A daemon as `status` and `--wait` show it. */
export interface DaemonView {
  id: string;
  self: boolean;
  host: string;
  pid: number;
  startedAt: string;
  /** `gone`: no report for longer than its --max-stale; if it runs, it refuses every key. */
  state: DaemonState;
  reportedAt: string;
  reportAgeMs: number;
  appliedChange: number;
  changeLag: number;
  appliedRevocations: string | null;
  revocationsBehind: number | null;
  lastInSyncAt: string | null;
  /** With keys asked about: whether it had applied all their revocations when it reported. */
  confirmed?: boolean;
}

export interface DaemonsView {
  /** False: this daemon is its store's only one (a file store). */
  shared: boolean;
  newestRevocation: string | null;
  daemons: DaemonView[];
  /** Running daemons holding revocations the store refused (absent: a file store, or a daemon that does not say). */
  unwritten?: UnwrittenHold[];
}

export interface ConfirmationView extends DaemonsView {
  /** Every live daemon refuses every key asked about (on a file store: at once). */
  confirmed: boolean;
  keys: string[];
  notShared: string[];
}

export function daemonState(r: DaemonReport): DaemonState {
  return r.reportAgeMs > (r.maxStaleMs ?? DEFAULT_MAX_STALE_MS) ? 'gone' : 'live';
}

function view(r: DaemonReport, withKeys: boolean): DaemonView {
  const v: DaemonView = {
    id: r.id,
    self: r.self,
    host: r.host,
    pid: r.pid,
    startedAt: r.startedAt,
    state: daemonState(r),
    reportedAt: r.reportedAt,
    reportAgeMs: r.reportAgeMs,
    appliedChange: r.appliedChange,
    changeLag: r.changeLag,
    appliedRevocations: r.appliedRevocations,
    revocationsBehind: r.revocationsBehind,
    lastInSyncAt: r.lastInSyncAt,
  };
  if (withKeys) v.confirmed = r.pending === 0;
  return v;
}

export function daemonsView(reports: DaemonReports | null): DaemonsView {
  if (reports === null) return { shared: false, newestRevocation: null, daemons: [] };
  return {
    shared: true,
    newestRevocation: reports.newestRevocation,
    daemons: reports.daemons.map((r) => view(r, false)),
    unwritten: reports.unwritten ?? [],
  };
}

/** `reports` null: a store this daemon alone serves, where a revocation holds once it returns. */
export function confirmationView(keys: readonly string[], reports: DaemonReports | null): ConfirmationView {
  if (reports === null)
    return {
      shared: false,
      confirmed: true,
      keys: [...keys],
      notShared: [],
      newestRevocation: null,
      daemons: [],
    };
  const daemons = reports.daemons.map((r) => view(r, true));
  return {
    shared: true,
    confirmed: reports.notShared.length === 0 && daemons.every((d) => d.state === 'gone' || d.confirmed === true),
    keys: [...keys],
    notShared: reports.notShared,
    newestRevocation: reports.newestRevocation,
    daemons,
    unwritten: reports.unwritten ?? [],
  };
}
