/**
 * The management plane through `inject()`, the end of one instance's life: its pack extended,
 * the instance stopped (every key revoked) and listed by state, then removed while its audit
 * trail stays; every change a log line without a secret; refusals in our error shape and the
 * store backup. The steps run in order, each from the state the one before it left, starting
 * from gpu-1 ready with its default key and a revoked second key. Over the real socket, through
 * the real CLI, the same routes run once in test/e2e/lifecycle-cli.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { BOT_SECRET, DEFAULT_SECRET } from '../helpers/counted-secrets.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { REACHABLE, instanceView } from '../helpers/instance-view.js';
import { manageStatusJson, refusal } from '../helpers/status-and-json.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
const AT = new Date(T0).toISOString();

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) => manageStatusJson(d, method, url, body);
const instance = (over: Record<string, unknown> = {}) => instanceView(simUrl, over);

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simUrl } = await startSim());
  // gpu-1 made ready (probed): default key k00000000001; ci-bot k00000000002 limited, used once, revoked.
  expect((await call('POST', '/v1/instances', { id: 'gpu-1', model: MODEL })).status).toBe(201);
  expect((await call('POST', '/v1/instances/gpu-1/ready', { endpoint: simUrl })).status).toBe(200);
  expect((await call('POST', '/v1/keys', { instance: 'gpu-1', name: 'ci-bot', limits: { rpm: 60 } })).status).toBe(201);
  expect((await call('POST', '/v1/keys/k00000000002/limits', { rpm: null, concurrency: 2 })).status).toBe(200);
  expect((await d.chat(BOT_SECRET, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
  expect((await call('POST', '/v1/keys/k00000000002/revoke', {})).status).toBe(200);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe("an instance's life, route by route", () => {
  it('extend, then stop revokes every key; a second stop is an invalid transition', async () => {
    expect(await call('POST', '/v1/instances/gpu-1/extend', { packEndsAt: '2026-12-01T00:00:00Z' })).toEqual({
      status: 200,
      json: instance({ packEndsAt: '2026-12-01T00:00:00.000Z', health: REACHABLE }),
    });
    expect(await call('POST', '/v1/instances/gpu-1/extend', { packEndsAt: '2020-12-01T00:00:00Z' })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        'packEndsAt 2020-12-01T00:00:00.000Z is not in the future.',
        'packEndsAt',
      ),
    );
    expect(await call('POST', '/v1/instances/gpu-1/stop', {})).toEqual({
      status: 200,
      json: instance({ state: 'stopped', packEndsAt: '2026-12-01T00:00:00.000Z', activeKeys: 0 }),
    });
    expect(await call('POST', '/v1/instances/gpu-1/stop', {})).toEqual(
      refusal(
        409,
        'conflict_error',
        'invalid_transition',
        'Instance gpu-1 is stopped; "stop" works only from pending, ready.',
      ),
    );
    expect(await call('GET', '/v1/revocations')).toEqual({
      status: 200,
      json: [
        { keyId: 'k00000000002', name: 'ci-bot', instance: 'gpu-1', revokedAt: AT, reason: 'manual' },
        { keyId: 'k00000000001', name: 'default', instance: 'gpu-1', revokedAt: AT, reason: 'instance_stopped' },
      ],
    });
  });

  it('list filters by state and refuses an unknown one', async () => {
    const stopped = instance({ state: 'stopped', packEndsAt: '2026-12-01T00:00:00.000Z', activeKeys: 0 });
    expect(await call('GET', '/v1/instances?state=stopped')).toEqual({ status: 200, json: [stopped] });
    expect(await call('GET', '/v1/instances?state=ready')).toEqual({ status: 200, json: [] });
    expect(await call('GET', '/v1/instances?state=sleepy')).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        '--state must be one of pending, ready, stopped, failed, terminated.',
        'state',
      ),
    );
    expect(await call('GET', '/v1/instances/gpu-1')).toEqual({ status: 200, json: stopped });
  });

  it('remove forgets the instance; its audit trail stays', async () => {
    expect(await call('DELETE', '/v1/instances/gpu-1')).toEqual({
      status: 200,
      json: { ...instance({ state: 'stopped', packEndsAt: '2026-12-01T00:00:00.000Z', activeKeys: 0 }), removed: true },
    });
    expect(await call('GET', '/v1/instances/gpu-1')).toEqual(
      refusal(
        404,
        'not_found_error',
        'instance_not_found',
        'No instance "gpu-1". List instances with `ob-proxy instances list`.',
      ),
    );
    expect(await call('GET', '/v1/audit?limit=3')).toEqual({
      status: 200,
      json: [
        {
          seq: 8,
          at: AT,
          type: 'key.revoked',
          instance: 'gpu-1',
          keyId: 'k00000000001',
          keyName: 'default',
          reason: 'instance_stopped',
        },
        { seq: 9, at: AT, type: 'instance.state', instance: 'gpu-1', state: 'stopped', reason: 'instance_stopped' },
        { seq: 10, at: AT, type: 'instance.removed', instance: 'gpu-1', state: 'stopped' },
      ],
    });
  });

  it('every change is a line in the log, without a secret', () => {
    const actions = d.logs.filter((l) => l.msg === 'management action').map((l) => l.action);
    expect(actions).toEqual([
      'POST /v1/instances',
      'POST /v1/instances/:id/ready',
      'POST /v1/keys',
      'POST /v1/keys/:id/limits',
      'POST /v1/keys/:id/revoke',
      'POST /v1/instances/:id/extend',
      'POST /v1/instances/:id/stop',
      'DELETE /v1/instances/:id',
    ]);
    const all = JSON.stringify(d.logs);
    expect(all).not.toContain(DEFAULT_SECRET);
    expect(all).not.toContain(BOT_SECRET);
  });
});

describe('refusals in our shape', () => {
  it('an unknown route, an id too long for the router, a body that is not JSON', async () => {
    expect(await call('GET', '/v1/nothing')).toEqual(
      refusal(
        404,
        'invalid_request_error',
        'invalid_argument',
        'No management route GET /v1/nothing. Is the CLI newer than the daemon?',
      ),
    );
    expect(await call('GET', `/v1/instances/${'a'.repeat(200)}`)).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        'An id in the path is too long: instance ids are at most 64 characters.',
      ),
    );
    const bad = await d.daemon.management.inject({
      method: 'POST',
      url: '/v1/instances',
      headers: { 'content-type': 'application/json' },
      payload: '{nope',
    });
    expect([bad.statusCode, bad.json()]).toEqual([
      400,
      {
        error: {
          message: "Body is not valid JSON but content-type is set to 'application/json'",
          type: 'invalid_request_error',
          code: 'invalid_argument',
          param: null,
        },
      },
    ]);
  });

  it('the store backup is the state as the daemon holds it', async () => {
    const backup = await call('GET', '/v1/store/backup');
    expect(backup.status).toBe(200);
    expect(backup.json).toMatchObject({
      store: 'memory',
      data: {
        instances: [],
        keys: [
          expect.objectContaining({ id: 'k00000000001', status: 'revoked' }),
          expect.objectContaining({ id: 'k00000000002', status: 'revoked' }),
        ],
      },
    });
    expect(JSON.stringify(backup.json)).not.toContain(DEFAULT_SECRET);
  });
});
