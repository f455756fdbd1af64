/**
 * Per-key limits on a shared PostgreSQL store, end to end: two real `ob-proxy serve` on one
 * database, real `ob-proxy simulate` and the real CLI. A limit set through one daemon holds on
 * the other at once, and a key's requests are counted across both.
 */
import { describe, expect, it } from 'vitest';
import { type KeyJson, ask, chatsOf } from '../helpers/limited-chat.js';
import { usePostgresRig } from '../helpers/postgres-rig.js';
import { cliJson, eventually } from '../helpers/processes.js';
import { readyInstance } from '../helpers/store-home.js';

describe('two daemons on one PostgreSQL store', () => {
  const rig = usePostgresRig({ simArgs: [] });

  it("a limit set through one daemon holds on the other at once; the key's requests are counted across both", async () => {
    // Windows are aligned to the clock on a shared store: an hour, so that none ends mid-test.
    const env = { OB_PROXY_LIMIT_WINDOW_MS: '3600000' };
    const { a: nodeA, b: nodeB } = await rig.pair(env, ['--grace', '1']);
    const [a, b] = [nodeA.serve, nodeB.serve];
    const [homeA, homeB] = [a.home, b.home];
    await readyInstance(homeA, 'gpu-1', rig.sim.url);
    const k = await cliJson<KeyJson>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'shared', '--rpm', '1'],
      homeA,
    );
    // Heard by b through the change log: the key and its limit.
    await eventually(async () => (await ask(b.baseUrl, k.secret, 'b1')).status === 200, 'the key on b');
    const refused = await ask(b.baseUrl, k.secret, 'b2');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('x-ratelimit-limit-requests')).toBe('1');
    // Cluster-wide (docs/scale-out.md): the one request of the window was b's, so a refuses too.
    const onA = await ask(a.baseUrl, k.secret, 'a1');
    expect(onA.status).toBe(429);
    expect(onA.headers.get('x-ratelimit-limit-requests')).toBe('1');
    expect((await chatsOf(rig.sim)).filter((r) => JSON.stringify(r.body).includes('"a1"'))).toEqual([]);
    // Lifted through a: b serves the key at once, with no x-ratelimit headers left.
    const lifted = await cliJson<KeyJson>(['keys', 'limit', k.id, '--rpm', 'none'], homeA);
    expect(lifted.limits).toEqual({ rpm: null, tpm: null, concurrency: null });
    const onB = await eventually(async () => {
      const r = await ask(b.baseUrl, k.secret, 'b3');
      return r.status === 200 ? r : undefined;
    }, 'the lifted limit on b');
    expect(onB.headers.get('x-ratelimit-limit-requests')).toBeNull();
    const listed = await cliJson<KeyJson[]>(['keys', 'list'], homeB);
    expect(listed.find((x) => x.id === k.id)!.limits).toEqual({ rpm: null, tpm: null, concurrency: null });
    expect(
      b
        .logs()
        .filter((l) => l.audit === 'key.limited' && l.key === k.id)
        .map((l) => l.origin),
    ).toEqual(['remote']);
  }, 60_000);
});
