/**
 * daemon/lifecycle-follow.ts: the daemon's one subscription to the lifecycle. Instance changes,
 * made here or heard from a shared store, re-arm the pack timer and bring the upstream token
 * along; a route's token is in place in the very turn its instance becomes ready.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { followLifecycle } from '../../daemon/lifecycle-follow.js';
import { UpstreamTokens } from '../../daemon/upstream-tokens.js';
import { cryptoSecretSource } from '../../src/domain/api-key.js';
import type { Instance } from '../../src/domain/instance.js';
import { LifecycleService } from '../../src/services/lifecycle.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { eventually } from '../helpers/processes.js';
import { type Harness, MODEL, startHarness } from '../reliability/harness.js';

const T0 = Date.parse('2026-11-23T12:00:00Z');
const ENDPOINT = 'http://127.0.0.1:9';

async function tokenFile(token: string): Promise<string> {
  const path = join(await mkdtemp(join(tmpdir(), 'obf-')), 'token');
  await writeFile(path, `${token}\n`);
  return path;
}

async function setup() {
  const lc = await LifecycleService.open({
    store: new MemoryStore(),
    clock: { now: () => T0 },
    secrets: cryptoSecretSource,
    models: [MODEL],
  });
  const tokens = new UpstreamTokens();
  const errors: string[] = [];
  const log = { error: (o: { err: string }) => errors.push(o.err) } as unknown as FastifyBaseLogger;
  let rearmed = 0;
  const stop = followLifecycle({
    lifecycle: lc,
    tokens,
    packTimerChanged: () => {
      rearmed++;
    },
    log,
  });
  return { lc, tokens, errors, stop, rearmed: () => rearmed };
}

/** What a listener registered after the daemon's sees of the token, at each instance event. */
function tokenAtEvents(lc: LifecycleService, tokens: UpstreamTokens, id: string): string[] {
  const seen: string[] = [];
  lc.onChange((e) => {
    if (e.instance === id && e.type.startsWith('instance.'))
      seen.push(`${e.type}${e.state === undefined ? '' : `:${e.state}`}=${tokens.get(id) ?? 'none'}`);
  });
  return seen;
}

describe('followLifecycle', () => {
  it('a token the route prepared is in place in the turn the instance is added and made ready', async () => {
    const { lc, tokens } = await setup();
    const seen = tokenAtEvents(lc, tokens, 'gpu-1');
    const file = await tokenFile('tok-one');
    await tokens.prepare(file);
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: ENDPOINT, upstreamTokenFile: file });
    await writeFile(file, 'tok-two\n');
    await tokens.prepare(file);
    await lc.ready('gpu-1');
    expect(seen).toEqual(['instance.added:pending=tok-one', 'instance.state:ready=tok-two']);
  });

  it('without a prepared token the file is read after the change (what the routes avoid)', async () => {
    const { lc, tokens } = await setup();
    const seen = tokenAtEvents(lc, tokens, 'gpu-1');
    const file = await tokenFile('tok-late');
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: ENDPOINT, upstreamTokenFile: file });
    expect(seen).toEqual(['instance.added:pending=none']);
    await eventually(() => tokens.get('gpu-1') === 'tok-late', 'the token read from its file');
  });

  it("re-arms the pack timer on every instance change and on no key change; forgets a removed instance's token", async () => {
    const { lc, tokens, rearmed } = await setup();
    const file = await tokenFile('tok');
    await tokens.prepare(file);
    await lc.addInstance({
      id: 'gpu-1',
      model: MODEL,
      endpoint: ENDPOINT,
      upstreamTokenFile: file,
      packEndsAt: '2026-11-24T12:00:00Z',
    });
    expect(rearmed()).toBe(1);
    await tokens.prepare(file);
    await (
      await lc.ready('gpu-1')
    ).defaultKey;
    expect(rearmed()).toBe(2);
    const { key } = await lc.createKey('gpu-1', 'ci');
    await lc.setKeyLimits(key.id, { rpm: 5 });
    await lc.revokeKey(key.id);
    expect(rearmed()).toBe(2);
    await lc.extend('gpu-1', '2026-11-25T12:00:00Z');
    await lc.halt('gpu-1', 'stop');
    expect(rearmed()).toBe(4);
    expect(tokens.get('gpu-1')).toBe('tok');
    await lc.remove('gpu-1');
    expect(rearmed()).toBe(5);
    expect(tokens.get('gpu-1')).toBeUndefined();
  });

  it('follows changes heard from a shared store: the file is read, never a token prepared for a local change', async () => {
    const { lc, tokens, rearmed } = await setup();
    const file = await tokenFile('tok-stale');
    // A local route read it, and its change was refused; the file has changed since.
    await tokens.prepare(file);
    await writeFile(file, 'tok-fresh\n');
    const instance: Instance = {
      id: 'gpu-9',
      deployment: 'd-9',
      model: MODEL,
      endpoint: ENDPOINT,
      state: 'ready',
      packEndsAt: null,
      upstreamTokenFile: file,
      aliases: [],
      createdAt: '2026-11-23T12:00:00.000Z',
      updatedAt: '2026-11-23T12:00:00.000Z',
    };
    const at = '2026-11-23T12:00:00.000Z';
    await lc.applyRemote([
      {
        no: 1,
        mutations: [
          { op: 'putInstance', instance },
          { op: 'appendEvent', event: { seq: 7, at, type: 'instance.state', instance: 'gpu-9', state: 'ready' } },
        ],
      },
    ]);
    expect(rearmed()).toBe(1);
    await eventually(() => tokens.get('gpu-9') === 'tok-fresh', 'the token read from its file');
    await lc.applyRemote([
      {
        no: 2,
        mutations: [
          { op: 'deleteInstance', id: 'gpu-9', deployment: 'd-9' },
          { op: 'appendEvent', event: { seq: 8, at, type: 'instance.removed', instance: 'gpu-9', state: 'ready' } },
        ],
      },
    ]);
    expect(tokens.get('gpu-9')).toBeUndefined();
    expect(rearmed()).toBe(2);
  });

  it('an unreadable file heard from a shared store is logged, and the instance has no token', async () => {
    const { lc, tokens, errors } = await setup();
    const instance: Instance = {
      id: 'gpu-8',
      deployment: 'd-8',
      model: MODEL,
      endpoint: ENDPOINT,
      state: 'pending',
      packEndsAt: null,
      upstreamTokenFile: '/nonexistent/ob-proxy-token',
      aliases: [],
      createdAt: '2026-11-23T12:00:00.000Z',
      updatedAt: '2026-11-23T12:00:00.000Z',
    };
    await lc.applyRemote([
      {
        no: 1,
        mutations: [
          { op: 'putInstance', instance },
          {
            op: 'appendEvent',
            event: {
              seq: 3,
              at: '2026-11-23T12:00:00.000Z',
              type: 'instance.added',
              instance: 'gpu-8',
              state: 'pending',
            },
          },
        ],
      },
    ]);
    await eventually(() => errors.length === 1, 'the error logged');
    expect(errors[0]).toMatch(/cannot read the upstream token file \/nonexistent\/ob-proxy-token \(ENOENT\)/);
    expect(tokens.get('gpu-8')).toBeUndefined();
  });

  it('stops following once unsubscribed', async () => {
    const { lc, tokens, stop, rearmed } = await setup();
    stop();
    await tokens.prepare(await tokenFile('tok'));
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: ENDPOINT });
    expect(rearmed()).toBe(0);
  });
});

describe('the daemon wired to it', () => {
  let h: Harness | undefined;
  afterAll(() => h?.stop());

  it('ready through the management API: the token is in place when the instance turns ready', async () => {
    h = await startHarness();
    const ctx = h.daemon.ctx;
    const seen = tokenAtEvents(ctx.lifecycle, ctx.upstreamTokens, 'gpu-1');
    const client = new DaemonClient(h.config.socket);
    const file = await tokenFile('tok-daemon');
    await client.addInstance({ id: 'gpu-1', model: MODEL, endpoint: ENDPOINT, upstreamTokenFile: file });
    await writeFile(file, 'tok-rotated\n');
    await client.ready('gpu-1', { wait: true, probe: false });
    expect(seen).toEqual(['instance.added:pending=tok-daemon', 'instance.state:ready=tok-rotated']);
    await client.remove('gpu-1');
    expect(seen.at(-1)).toBe('instance.removed:ready=none');
  });
});
