/**
 * On a shared store one daemon ends packs on their clock (it holds an advisory
 * lock), and when it dies another takes over within seconds. Two real daemons on a fresh
 * PostgreSQL database: the first pack end is done by A (B hears it as a remote change); A is
 * then killed with SIGKILL before the next pack ends, and B ends that one itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { type SimProcess, eventually, startSimulate } from '../helpers/processes.js';
import { type ServeNode, ServeNodes } from '../helpers/serve-nodes.js';

const MODEL = 'gemma4:26b';

/** The audit log line a daemon wrote for a key's revocation, if any. */
function revocationLine(n: ServeNode, keyId: string): Record<string, unknown> | undefined {
  return n.serve.logs().find((l) => l.audit === 'key.revoked' && l.key === keyId);
}

describe('pack ends on a shared store: one daemon does it, another takes over when it dies', () => {
  let db: TestDatabase;
  let sim: SimProcess;
  const nodes = new ServeNodes();
  let a: ServeNode;
  let b: ServeNode;

  beforeAll(async () => {
    db = await freshDatabase();
    sim = await startSimulate([MODEL], ['--chunks', '1']);
    // One after the other, so A is the one that takes the chores lock.
    a = await nodes.start(db.url);
    b = await nodes.start(db.url);
  });
  afterAll(async () => {
    await nodes.stopAll();
    await sim?.stop();
    await db?.drop();
  }, 60_000);

  it(
    'A ends the first pack; after kill -9 of A, B ends the next one with the same audit trail',
    { timeout: 60_000 },
    async () => {
      const soon = (ms: number): string => new Date(Date.now() + ms).toISOString();

      await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url, packEndsAt: soon(2_500) });
      const first = (await a.api.ready('gpu-1', { wait: true })).defaultKey!;
      // A did the chore: B heard the revocation as a change made elsewhere.
      const heard = await eventually(() => revocationLine(b, first.id), 'B hears the first pack end', 15_000);
      expect(heard).toMatchObject({ audit: 'key.revoked', instance: 'gpu-1', reason: 'pack_ended', origin: 'remote' });
      // A's own line may still be in its stdout pipe when B's arrives (B hears the commit by NOTIFY).
      const done = await eventually(() => revocationLine(a, first.id), 'A logs the first pack end', 15_000);
      expect(done).toMatchObject({ reason: 'pack_ended' });
      expect(done).not.toHaveProperty('origin');

      await a.api.addInstance({ id: 'gpu-2', model: MODEL, endpoint: sim.url, packEndsAt: soon(4_000) });
      const second = (await a.api.ready('gpu-2', { wait: true })).defaultKey!;
      a.serve.proc.kill('SIGKILL');
      await a.serve.exited;

      // B takes the lock over and ends the pack on its own clock: its own audit line, no origin.
      const own = await eventually(() => revocationLine(b, second.id), 'B ends the second pack itself', 20_000);
      expect(own).toMatchObject({ audit: 'key.revoked', instance: 'gpu-2', reason: 'pack_ended' });
      expect(own).not.toHaveProperty('origin');
      const keys = await b.api.listKeys('gpu-2');
      expect(keys.map((k) => [k.id, k.status, k.revokeReason])).toEqual([[second.id, 'revoked', 'pack_ended']]);
      expect((await b.api.getInstance('gpu-2')).state).toBe('stopped');
      expect(revocationLine(a, second.id)).toBeUndefined();
    },
  );
});
