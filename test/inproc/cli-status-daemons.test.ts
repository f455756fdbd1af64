/**
 * `ob-proxy status` on a shared store, as a person reads it: each daemon's revocations and
 * changes in words (all applied, how many not), and a summary of whether every live daemon
 * refuses every revoked key. The revocation points are PostgreSQL transaction ids: --json keeps
 * them, the table does not show them. The daemon's answer is given, so every case is exact.
 */
import { describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { runCli } from '../../cli/program.js';
import type { DaemonView } from '../../src/services/revocation-confirmation.js';
import type { StatusView } from '../../src/wire/views.js';

function daemon(id: string, patch: Partial<DaemonView> = {}): DaemonView {
  return {
    id: `${id}-0000-4000-8000-000000000000`,
    self: false,
    host: 'gw',
    pid: 100,
    startedAt: '2026-11-23T12:00:00.000Z',
    state: 'live',
    reportedAt: '2026-11-23T12:10:00.000Z',
    reportAgeMs: 300,
    appliedChange: 812,
    changeLag: 0,
    appliedRevocations: '790',
    revocationsBehind: 0,
    lastInSyncAt: '2026-11-23T12:10:00.000Z',
    ...patch,
  };
}

const STATUS: StatusView = {
  version: '0.1.0',
  pid: 4242,
  baseUrl: 'http://127.0.0.1:8080',
  store: 'postgres://ob@db.internal:5432/obproxy',
  socket: '/var/lib/ob-proxy/ob-proxy.sock',
  startedAt: '2026-11-23T12:00:00.000Z',
  models: ['gemma4:26b'],
  storeSync: {
    location: 'postgres://ob@db.internal:5432/obproxy',
    state: 'in_sync',
    lastSyncAt: '2026-11-23T12:10:00.000Z',
    lastSyncAgeMs: 400,
    maxStaleMs: 30_000,
    holdsChores: true,
    problem: null,
  },
  daemons: { shared: true, newestRevocation: '783', daemons: [] },
};

class Answering extends DaemonClient {
  constructor(private readonly answer: StatusView) {
    super('/inproc/ob-proxy.sock');
  }
  override call<T>(): Promise<T> {
    return Promise.resolve(this.answer as T);
  }
}

async function status(daemons: NonNullable<StatusView['daemons']>): Promise<string> {
  let out = '';
  const code = await runCli(['status'], {
    version: '0.0.0',
    io: { out: (s) => (out += s), err: (s) => (out += s), isTTY: false, env: {} },
    connect: () => Promise.resolve(new Answering({ ...STATUS, daemons })),
    serve: () => Promise.reject(new Error('no')),
    simulate: () => Promise.reject(new Error('no')),
    demo: () => Promise.reject(new Error('no')),
  });
  expect(code).toBe(0);
  return out.slice(out.indexOf('\n\n') + 1);
}

describe('status: the daemons of a shared store', () => {
  it('every live daemon up to date', async () => {
    expect(
      await status({
        shared: true,
        newestRevocation: '783',
        daemons: [daemon('a1b2c3d4', { self: true }), daemon('e5f6a7b8', { host: 'gw2', pid: 101 })],
      }),
    ).toBe(
      [
        '',
        'Daemons of the store, as each last reported:',
        'DAEMON           HOST  PID  STATE  REVOCATIONS  CHANGES           LAST REPORT',
        'a1b2c3d4 (this)  gw    100  live   all applied  up to date (812)  0.3 s ago',
        'e5f6a7b8         gw2   101  live   all applied  up to date (812)  0.3 s ago',
        'Every live daemon (2) has applied every revocation: each refuses every revoked key.',
        '',
      ].join('\n'),
    );
  });

  it('one behind, one gone, one older: said in words, no transaction ids', async () => {
    const text = await status({
      shared: true,
      newestRevocation: '792',
      daemons: [
        daemon('a1b2c3d4', { self: true, appliedRevocations: '793' }),
        daemon('e5f6a7b8', { revocationsBehind: 2, changeLag: 3, appliedChange: 809, appliedRevocations: '790' }),
        daemon('c9d0e1f2', { state: 'gone', reportAgeMs: 45_000, revocationsBehind: 1 }),
        daemon('f3a4b5c6', { appliedRevocations: null, revocationsBehind: null }),
      ],
    });
    expect(text).toBe(
      [
        '',
        'Daemons of the store, as each last reported:',
        'DAEMON           HOST  PID  STATE  REVOCATIONS    CHANGES           LAST REPORT',
        'a1b2c3d4 (this)  gw    100  live   all applied    up to date (812)  0.3 s ago',
        'e5f6a7b8         gw    100  live   2 not applied  3 behind (809)    0.3 s ago',
        'c9d0e1f2         gw    100  gone   1 not applied  up to date (812)  45 s ago',
        'f3a4b5c6         gw    100  live   not reported   up to date (812)  0.3 s ago',
        '2 live daemons of 3 have not applied every revocation yet (REVOCATIONS above): until they do, they may still serve those keys. `keys revoke --wait` waits for them.',
        '1 daemon gone (no report for longer than its --max-stale): if it still runs, it refuses every key.',
        '',
      ].join('\n'),
    );
    expect(text).not.toMatch(/79\d/);
  });

  it('revocations the store refused, held by a daemon (one with no row yet): who, how many, since when', async () => {
    const text = await status({
      shared: true,
      newestRevocation: '783',
      daemons: [daemon('a1b2c3d4', { self: true }), daemon('e5f6a7b8', { state: 'gone', reportAgeMs: 45_000 })],
      unwritten: [
        { id: daemon('a1b2c3d4').id, self: true, revocations: 1, oldestAt: '2026-11-23T12:09:58.123Z' },
        { id: daemon('e5f6a7b8').id, self: false, revocations: 3, oldestAt: '2026-11-23T12:09:41.000Z' },
        { id: daemon('c9d0e1f2').id, self: false, revocations: 2, oldestAt: null },
      ],
    });
    expect(text.split('\n').slice(5)).toEqual([
      'Every live daemon (1) has applied every revocation the store holds: each refuses every key revoked there.',
      '1 daemon gone (no report for longer than its --max-stale): if it still runs, it refuses every key.',
      'Daemon a1b2c3d4 (this) holds 1 revocation the store refused, the oldest made at 2026-11-23T12:09:58.123Z, in its memory and journal alone: it refuses that key, and the other daemons know nothing of it (each refuses every key once it has not written for --max-stale). It is written once the store takes writes, while that daemon runs.',
      'Daemon e5f6a7b8 holds 3 revocations the store refused, the oldest made at 2026-11-23T12:09:41.000Z, in its memory and journal alone: it refuses those keys, and the other daemons know nothing of them (each refuses every key once it has not written for --max-stale). They are written once the store takes writes, while that daemon runs.',
      'Daemon c9d0e1f2 holds 2 revocations the store refused, in its memory and journal alone: it refuses those keys, and the other daemons know nothing of them (each refuses every key once it has not written for --max-stale). They are written once the store takes writes, while that daemon runs.',
      '',
    ]);
  });

  it('no revocation yet', async () => {
    expect(await status({ shared: true, newestRevocation: null, daemons: [daemon('a1b2c3d4')] })).toContain(
      '\nNo key has been revoked through this store yet.\n',
    );
  });
});
