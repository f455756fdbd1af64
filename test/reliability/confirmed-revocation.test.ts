/**
 * `--wait` on the commands that revoke, with three `ob-proxy serve` processes on one PostgreSQL
 * and one of them stopped with SIGSTOP: `keys revoke --wait` exits 1 at its bound and names the
 * stopped daemon and what it last reported; `ob-proxy status` shows it behind meanwhile; after
 * SIGCONT a second `--wait` is confirmed by all three. A daemon silent for longer than its
 * --max-stale is named gone, and does not hold a confirmation back.
 */
import { hostname } from 'node:os';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SimProcess, eventually, runCli, startSimulate } from '../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { type ServeNode, ServeNodes, modelsStatus } from '../helpers/serve-nodes.js';

const MODEL = 'gemma4:26b';

let sim: SimProcess;
let db: TestDatabase;
const nodes = new ServeNodes();
let a: ServeNode;
let b: ServeNode;
let c: ServeNode;

/** A daemon's entry as the JSON outputs give it: the figures that move with time are checked apart. */
function daemon(n: ServeNode, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    self: n === a,
    host: hostname(),
    pid: n.serve.proc.pid,
    startedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    state: 'live',
    reportedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    reportAgeMs: expect.any(Number),
    appliedChange: expect.any(Number),
    changeLag: expect.any(Number),
    appliedRevocations: expect.stringMatching(/^\d+$/),
    revocationsBehind: 0,
    lastInSyncAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    ...extra,
  };
}

interface StatusJson {
  daemons: { shared: boolean; newestRevocation: string | null; daemons: Record<string, unknown>[] };
}

async function status(): Promise<StatusJson> {
  const r = await runCli(['status', '--json'], { home: a.serve.home });
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as StatusJson;
}

beforeAll(async () => {
  sim = await startSimulate([MODEL], ['--chunks', '1']);
  db = await freshDatabase();
  a = await nodes.start(db.url);
  b = await nodes.start(db.url);
  c = await nodes.start(db.url);
  await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
  await a.api.ready('gpu-1', { wait: true });
}, 60_000);
afterAll(async () => {
  for (const n of nodes.all) n.serve.proc.kill('SIGCONT');
  await nodes.stopAll();
  await db?.drop();
  await sim?.stop();
}, 60_000);

it('three daemons, one stopped: --wait fails at its bound naming it, status shows it behind, and after SIGCONT --wait confirms', async () => {
  const first = await a.api.createKey('gpu-1', 'first');
  const second = await a.api.createKey('gpu-1', 'second');
  // Every daemon has reported, each with a revocation point and nothing behind.
  await eventually(
    async () => {
      const s = await status();
      return s.daemons.daemons.length === 3 && s.daemons.daemons.every((d) => d.revocationsBehind === 0);
    },
    'every daemon reports',
    5000,
  );
  expect((await status()).daemons).toEqual({
    shared: true,
    newestRevocation: null,
    daemons: [daemon(a), daemon(b), daemon(c)],
    unwritten: [],
  });

  c.serve.proc.kill('SIGSTOP');
  const revoked = await runCli(['keys', 'revoke', first.id, '--yes', '--wait', '--json'], { home: a.serve.home });
  expect(revoked.code).toBe(1);
  const out = JSON.parse(revoked.stdout) as Record<string, unknown> & {
    confirmation: { waitedMs: number; newestRevocation: string };
  };
  expect(out).toEqual({
    ...(await a.api.listKeys()).find((k) => k.id === first.id),
    confirmation: {
      shared: true,
      confirmed: false,
      keys: [first.id],
      notShared: [],
      newestRevocation: expect.stringMatching(/^\d+$/),
      daemons: [
        daemon(a, { confirmed: true }),
        daemon(b, { confirmed: true }),
        daemon(c, { confirmed: false, revocationsBehind: 1 }),
      ],
      unwritten: [],
      waitedMs: expect.any(Number),
    },
  });
  expect(out.status).toBe('revoked');
  // Given up at the bound (2 s by default), within one more look at the reports.
  expect(out.confirmation.waitedMs).toBeGreaterThanOrEqual(2000);
  expect(out.confirmation.waitedMs).toBeLessThan(3000);
  const cId = ((out.confirmation as unknown as StatusJson['daemons']).daemons[2]!.id as string).slice(0, 8);
  expect(revoked.stderr).toMatch(
    new RegExp(
      `^error: The revocation is made, but not confirmed within 2\\.0 s \\(--wait-timeout\\): 1 of 3 live daemon\\(s\\) did not confirm: ${cId} \\(${hostname()}, pid ${c.serve.proc.pid}\\) had not applied 1 revocation, change \\d+ \\(\\d+ behind\\), last report \\d+\\.\\d s ago\\. Follow them with \`ob-proxy status\`\\.\\n$`,
    ),
  );

  // Meanwhile, status shows the stopped daemon behind by that revocation, and silent.
  const during = await status();
  expect(during.daemons).toEqual({
    shared: true,
    newestRevocation: out.confirmation.newestRevocation,
    daemons: [daemon(a), daemon(b), daemon(c, { revocationsBehind: 1 })],
    unwritten: [],
  });
  expect(during.daemons.daemons[2]!.reportAgeMs as number).toBeGreaterThanOrEqual(2000);
  const human = await runCli(['status'], { home: a.serve.home });
  expect(human.stdout).toContain('Daemons of the store, as each last reported:\n');
  expect(human.stdout).toMatch(
    new RegExp(
      `\\n${cId}\\s+${hostname()}\\s+${c.serve.proc.pid}\\s+live\\s+1 not applied\\s+(up to date|\\d+ behind) \\(\\d+\\)\\s+\\d+\\.\\d s ago\\n`,
    ),
  );
  expect(human.stdout).toContain(
    '1 live daemon of 3 has not applied every revocation yet (REVOCATIONS above): until it does, it may still serve those keys. `keys revoke --wait` waits for them.\n',
  );

  c.serve.proc.kill('SIGCONT');
  expect(await modelsStatus(c, first.secret)).toBe(401);
  const again = await runCli(['keys', 'revoke', second.id, '--yes', '--wait'], { home: a.serve.home });
  expect(again).toEqual({
    code: 0,
    stdout: expect.stringMatching(
      new RegExp(
        `^Revoked key ${second.id} \\("second"\\) of instance gpu-1\\. It answers 401 from now on\\.\\nConfirmed by all 3 live daemons of the store in \\d+\\.\\d s\\.\\n$`,
      ),
    ),
    stderr: '',
  });
  for (const n of [a, b, c]) expect(await modelsStatus(n, second.secret)).toBe(401);

  const stopped = await runCli(['instances', 'stop', 'gpu-1', '--yes', '--wait', '--json'], { home: a.serve.home });
  expect(stopped.stderr).toBe('');
  expect(stopped.code).toBe(0);
  const keys = (await a.api.listKeys('gpu-1')).map((k) => k.id).sort();
  expect(JSON.parse(stopped.stdout)).toEqual({
    ...(await a.api.getInstance('gpu-1')),
    confirmation: {
      shared: true,
      confirmed: true,
      keys,
      notShared: [],
      newestRevocation: expect.stringMatching(/^\d+$/),
      daemons: [daemon(a, { confirmed: true }), daemon(b, { confirmed: true }), daemon(c, { confirmed: true })],
      unwritten: [],
      waitedMs: expect.any(Number),
    },
  });
  expect(keys).toHaveLength(3);
  console.log(
    `instances stop --wait confirmed by 3 daemons in ${(JSON.parse(stopped.stdout) as { confirmation: { waitedMs: number } }).confirmation.waitedMs} ms`,
  );
}, 60_000);

it('a daemon silent for longer than its --max-stale is named gone, and confirms nothing yet holds nothing back', async () => {
  const d = await nodes.start(db.url, { OB_PROXY_MAX_STALE: '1' });
  await d.api.addInstance({ id: 'gpu-2', model: MODEL, endpoint: sim.url });
  await d.api.ready('gpu-2', { wait: true });
  const key = await d.api.createKey('gpu-2', 'third');
  await eventually(async () => (await modelsStatus(a, key.secret)) === 200, 'A serves the new key', 5000);
  d.serve.proc.kill('SIGSTOP');
  await eventually(
    async () => (await status()).daemons.daemons.find((x) => x.pid === d.serve.proc.pid)?.state === 'gone',
    'the stopped daemon is gone',
    // A wait, not a bound on speed: each look spawns `status`, seconds apart on a loaded machine.
    15_000,
  );
  const r = await runCli(['keys', 'revoke', key.id, '--yes', '--wait'], { home: a.serve.home });
  const dId = ((await status()).daemons.daemons.find((x) => x.pid === d.serve.proc.pid)!.id as string).slice(0, 8);
  expect(r).toEqual({
    code: 0,
    stdout: expect.stringMatching(
      new RegExp(
        `^Revoked key ${key.id} \\("third"\\) of instance gpu-2\\. It answers 401 from now on\\.\\nConfirmed by all 3 live daemons of the store in \\d+\\.\\d s\\.\\nGone \\(no report for longer than their --max-stale, so they refuse every key if they still run\\): ${dId} \\(${hostname()}, pid ${d.serve.proc.pid}\\)\\.\\n$`,
      ),
    ),
    stderr: '',
  });
  // Back, it refuses the key: out of sync first (503), then revoked (401), never served.
  d.serve.proc.kill('SIGCONT');
  expect([401, 503]).toContain(await modelsStatus(d, key.secret));
  await eventually(async () => (await modelsStatus(d, key.secret)) === 401, 'D refuses the key', 5000);
}, 60_000);
