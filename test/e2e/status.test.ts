/**
 * `ob-proxy status` says how a daemon stands with its store. On lowdb, the file and that
 * this daemon alone writes it. On a shared PostgreSQL (a server of its own, so it can be killed):
 * in sync, the age of the last sync, and which of two daemons does the chores; once the database
 * has been away for longer than --max-stale, stale; in sync again when it returns.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { StatusView } from '../../src/wire/views.js';
import { type ServeProcess, cliJson, eventually, runCli, startServe, tmpHome } from '../helpers/processes.js';
import { type Cluster, startCluster } from '../helpers/postgres.js';

const MAX_STALE_S = 3;

let cluster: Cluster;
const homes: string[] = [];
const daemons: ServeProcess[] = [];

beforeAll(async () => {
  cluster = await startCluster();
  for (let i = 0; i < 2; i++) {
    const home = await tmpHome();
    homes.push(home);
    daemons.push(
      await startServe(home, ['--store', cluster.url, '--max-stale', String(MAX_STALE_S)], {
        OB_PROXY_STORE_CATCHUP_MS: '200',
      }),
    );
  }
}, 60_000);

afterAll(async () => {
  for (const d of daemons) await d.stop();
  await cluster?.destroy();
}, 60_000);

const status = (home: string): Promise<StatusView> => cliJson<StatusView>(['status'], home);

it('on lowdb: the store file, written by this daemon only', async () => {
  const home = await tmpHome();
  const serve = await startServe(home);
  try {
    const s = await status(home);
    expect(s).toMatchObject({ store: `${home}/db.json`, storeSync: null, baseUrl: serve.baseUrl, pid: serve.proc.pid });
    const human = await runCli(['status'], { home });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`store    ${home}/db.json (this daemon only)\n`);
    expect(human.stdout).toContain(`serving  ${serve.baseUrl}\n`);
  } finally {
    await serve.stop();
  }
});

it(
  'on PostgreSQL: in sync, one daemon doing the chores; stale once the database is away past --max-stale; in sync again',
  { timeout: 90_000 },
  async () => {
    // Both in sync, and exactly one holds the chores lock (it may take a catch-up period to settle).
    const both = await eventually(
      async () => {
        const s = await Promise.all(homes.map(status));
        return s.every((x) => x.storeSync?.state === 'in_sync') &&
          s.filter((x) => x.storeSync?.holdsChores).length === 1
          ? s
          : undefined;
      },
      'both daemons in sync, one holding the chores',
      15_000,
    );
    for (const s of both) {
      expect(s.store).toContain(`127.0.0.1:${cluster.port}`);
      expect(s.storeSync).toMatchObject({
        location: s.store,
        state: 'in_sync',
        maxStaleMs: MAX_STALE_S * 1000,
        problem: null,
      });
      // Synced by a catch-up read every 200 ms: never far behind.
      expect(s.storeSync!.lastSyncAgeMs).toBeLessThan(MAX_STALE_S * 1000);
      expect(Date.parse(s.storeSync!.lastSyncAt)).toBeGreaterThan(Date.now() - MAX_STALE_S * 1000);
    }
    const chores = both.findIndex((s) => s.storeSync!.holdsChores);
    const human = await runCli(['status'], { home: homes[chores]! });
    expect(human.stdout).toMatch(
      new RegExp(
        `store    ${both[chores]!.store.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(shared\\): in sync; last in sync \\d+\\.\\d s ago \\(.*\\); this daemon does the cluster's chores \\(ending packs\\)\\n`,
      ),
    );
    expect((await runCli(['status'], { home: homes[1 - chores]! })).stdout).toContain(
      "another daemon does the cluster's chores",
    );

    await cluster.kill9();
    const stale = await eventually(
      async () => {
        const s = await status(homes[0]!);
        return s.storeSync?.state === 'stale' ? s : undefined;
      },
      'the daemon to say it is stale',
      20_000,
    );
    expect(stale.storeSync!.lastSyncAgeMs).toBeGreaterThan(MAX_STALE_S * 1000);
    // Why, as the connection said.
    expect(stale.storeSync!.problem).toMatch(/^cannot read the change log: (ECONNREFUSED|.*terminat)/);
    const staleHuman = await runCli(['status'], { home: homes[0]! });
    expect(staleHuman.code).toBe(0);
    expect(staleHuman.stdout).toContain(
      '(shared): stale: out of sync for longer than --max-stale (3.0 s), every key refused with 503; last in sync',
    );

    await cluster.start();
    for (const home of homes) {
      await eventually(async () => (await status(home)).storeSync?.state === 'in_sync', 'in sync again', 30_000);
    }
  },
);
