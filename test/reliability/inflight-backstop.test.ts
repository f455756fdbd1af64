/**
 * In-flight work ends however a revocation comes (docs/security.md): a revocation that took effect
 * in memory while its write failed (its `key.revoked` event is still emitted, and the audit trail
 * shows it), and a pack whose end the pack timer has not
 * reached (a late timer: here the daemon's clock jumps past the end, the timer armed for an hour).
 * The daemon's per-250 ms sweep re-checks keys with work in flight. In-process, for the store
 * switch and the clock; sockets, Fastify, undici and the simulator are real.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import type { Simulator } from '../../simulator/simulator.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { eventually } from '../helpers/processes.js';
import { type OpenStream, openChat, sseData, tokensIn } from '../helpers/raw-http.js';
import { MODEL, chatBody, startSim, tmpHome } from './harness.js';

const clock = {
  offsetMs: 0,
  now(): number {
    return Date.now() + this.offsetMs;
  },
};
const store = new MemoryStore();
let daemon: Daemon;
let sim: Simulator;
let simUrl: string;

beforeAll(async () => {
  const home = await tmpHome();
  const config = { ...resolveConfig({ home, port: 0 }, {}, home), logLevel: 'warn' };
  const logStream = new Writable({
    write(_c, _e, done) {
      done();
    },
  });
  daemon = await startDaemon(config, { version: 'test', clock, store, logStream });
  ({ sim, url: simUrl } = await startSim());
});

afterAll(async () => {
  await daemon?.shutdown(0);
  await sim?.close();
});

async function streamOn(id: string, packEndsAt?: string): Promise<{ keyId: string; s: OpenStream }> {
  const lc = daemon.ctx.lifecycle;
  await lc.addInstance({ id, model: MODEL, endpoint: simUrl, ...(packEndsAt === undefined ? {} : { packEndsAt }) });
  const key = await (await lc.ready(id)).defaultKey;
  const secret = lc.claimSecret(key!.id)!;
  const s = await openChat(
    daemon.ctx.baseUrl,
    secret,
    chatBody(`tag-${id} [[sim chunks=60 tokensPerSecond=5]]`, { stream: true }),
  );
  await eventually(() => tokensIn(s.text()) >= 2, 'the first tokens');
  return { keyId: key!.id, s };
}

function expectEndedWith(s: OpenStream, code: string, since: number): void {
  const data = sseData(s.text());
  expect(data).not.toContain('[DONE]');
  expect(JSON.parse(data.at(-1)!)).toEqual({
    error: { message: expect.any(String), type: 'authentication_error', code, param: null },
  });
  // Within the second promised, at 5 tokens a second; a stream not ended runs on for 10 s.
  expect(
    tokensIn(
      s.pieces
        .filter((p) => p.at > since)
        .map((p) => p.text)
        .join(''),
    ),
  ).toBeLessThanOrEqual(5);
}

it("a revocation whose write failed still ends the key's stream", async () => {
  const { keyId, s } = await streamOn('unwritten');
  store.failWrites = true;
  try {
    await expect(daemon.ctx.lifecycle.revokeKey(keyId)).rejects.toMatchObject({ code: 'store_write_failed' });
  } finally {
    store.failWrites = false;
  }
  const refused = Date.now();
  expect(daemon.ctx.lifecycle.registry.events.filter((e) => e.keyId === keyId).map((e) => [e.type, e.reason])).toEqual([
    ['key.created', undefined],
    ['key.revoked', 'manual'],
  ]);
  await s.ended;
  expectEndedWith(s, 'revoked_api_key', refused);
  await eventually(
    () => sim.requests.find((r) => JSON.stringify(r.body).includes('tag-unwritten'))?.aborted,
    'upstream aborted',
  );
});

it('a pack end the pack timer has not reached yet ends the stream with pack_ended, and the pack', async () => {
  const { keyId, s } = await streamOn('late-timer', new Date(clock.now() + 3_600_000).toISOString());
  clock.offsetMs += 7_200_000;
  const passed = Date.now();
  await s.ended;
  expectEndedWith(s, 'pack_ended', passed);
  await eventually(
    () => daemon.ctx.lifecycle.registry.instances.get('late-timer')?.state === 'stopped',
    'the pack ended by the sweep',
  );
  expect(daemon.ctx.lifecycle.registry.keys.get(keyId)).toMatchObject({
    status: 'revoked',
    revokeReason: 'pack_ended',
  });
});
