/**
 * Logs an operator can work from: every management action and every audit event is a
 * line, every refused request a line with its code (and key id where known), a model server's
 * failure a warning; never a secret.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { SECRET_PATTERN } from '../../src/domain/api-key.js';
import { type Harness, MODEL, chatBody, post, startHarness, startSim } from '../reliability/harness.js';

let h: Harness;
let sim: Simulator;
let client: DaemonClient;
const secrets: string[] = [];
let keyId = '';
let defaultId = '';

beforeAll(async () => {
  h = await startHarness();
  const s = await startSim();
  sim = s.sim;
  client = new DaemonClient(h.config.socket);
  await client.addInstance({ id: 'gpu-1', model: MODEL, endpoint: s.url });
  const ready = await client.ready('gpu-1', { wait: true });
  defaultId = ready.defaultKey!.id;
  secrets.push(ready.defaultKey!.secret!);
  const k = await client.createKey('gpu-1', 'notebook');
  keyId = k.id;
  secrets.push(k.secret);
  await client.alias('gpu-1', { add: ['claude-sonnet-4-5'] });
  await expect(client.createKey('nope', 'x')).rejects.toThrow();
  expect((await post(h.baseUrl, null, chatBody('x'))).status).toBe(400);
  expect((await post(h.baseUrl, `${secrets[1]!.slice(0, -4)}AAAA`, chatBody('x'))).status).toBe(401);
  expect((await post(h.baseUrl, secrets[1]!, chatBody('x [[sim fail=http-error errorStatus=500]]'))).status).toBe(500);
  expect((await post(h.baseUrl, secrets[1]!, chatBody('x', { temperature: 9 }))).status).toBe(400);
  await client.revokeKey(keyId);
  expect((await post(h.baseUrl, secrets[1]!, chatBody('x'))).status).toBe(401);
  await client.move('gpu-1', 'stop');
});
afterAll(async () => {
  await client.close();
  await h.stop();
  await sim.close();
});

const pick = (l: Record<string, unknown>, ...fields: string[]): Record<string, unknown> =>
  Object.fromEntries(fields.filter((f) => f in l).map((f) => [f, l[f]]));

it('each management action and its result is a line', () => {
  const actions = h.logs
    .filter((l) => l.msg === 'management action')
    .map((l) => pick(l, 'action', 'id', 'instance', 'status'));
  expect(actions).toEqual([
    { action: 'POST /v1/instances', id: 'gpu-1', status: 201 },
    { action: 'POST /v1/instances/:id/ready', id: 'gpu-1', status: 200 },
    { action: 'POST /v1/keys', instance: 'gpu-1', status: 201 },
    { action: 'POST /v1/instances/:id/aliases', id: 'gpu-1', status: 200 },
    { action: 'POST /v1/keys/:id/revoke', id: keyId, status: 200 },
    { action: 'POST /v1/instances/:id/stop', id: 'gpu-1', status: 200 },
  ]);
  const refused = h.logs
    .filter((l) => l.msg === 'refused' && String(l.route).includes('/v1/keys'))
    .map((l) => pick(l, 'route', 'status', 'code'));
  expect(refused).toEqual([{ route: 'POST /v1/keys', status: 404, code: 'instance_not_found' }]);
});

it('each audit event is a line: keys made and revoked by hand or by the stop', () => {
  const audit = h.logs
    .filter((l) => l.msg === 'audit')
    .map((l) => [l.audit, l.key ?? null, l.reason ?? l.state ?? null]);
  expect(audit).toEqual([
    ['instance.added', null, 'pending'],
    ['instance.state', null, 'ready'],
    ['key.created', defaultId, null],
    ['key.created', keyId, null],
    ['instance.aliased', null, null],
    ['key.revoked', keyId, 'manual'],
    ['key.revoked', defaultId, 'instance_stopped'],
    ['instance.state', null, 'instance_stopped'],
  ]);
  const aliased = h.logs.find((l) => l.audit === 'instance.aliased')!;
  expect(pick(aliased, 'level', 'msg', 'audit', 'instance', 'aliases', 'seq')).toEqual({
    level: 30,
    msg: 'audit',
    audit: 'instance.aliased',
    instance: 'gpu-1',
    aliases: ['claude-sonnet-4-5'],
    seq: 5,
  });
});

it('each refused request is a line with its code and the key id where known; a model server failure is a warning', () => {
  const refused = h.logs
    .filter((l) => l.msg === 'refused' && l.route === 'POST /v1/chat/completions')
    .map((l) => pick(l, 'status', 'code', 'key', 'keyKnown'));
  expect(refused).toEqual([
    { status: 400, code: 'missing_api_key' },
    // The secret's tail was wrong: its id names the key (troubleshooting.md).
    { status: 401, code: 'invalid_api_key', key: keyId, keyKnown: true },
    { status: 400, code: 'invalid_request', key: keyId },
    { status: 401, code: 'revoked_api_key', key: keyId },
  ]);
  const warned = h.logs
    .filter((l) => l.msg === 'model server failed')
    .map((l) => pick(l, 'level', 'instance', 'key', 'code'));
  expect(warned).toEqual([{ level: 40, instance: 'gpu-1', key: keyId, code: 'upstream_error' }]);
});

it('no line holds a secret', () => {
  for (const line of h.rawLogs) {
    expect(line).not.toMatch(SECRET_PATTERN);
    for (const s of secrets) expect(line).not.toContain(s.slice(-20));
  }
});

it('a guesser blocked by the bad-key limit gets one warning line, not a line per refusal', async () => {
  const g = await startHarness({ badKeyLimit: 3 });
  try {
    for (let i = 0; i < 12; i++)
      await post(g.baseUrl, 'ob_sk_000000000000_00000000000000000000000000000000000000', chatBody('x'));
    const refused = g.logs.filter((l) => l.msg === 'refused').map((l) => l.code);
    expect(refused).toEqual(['invalid_api_key', 'invalid_api_key', 'invalid_api_key']);
    expect(
      g.logs.filter((l) => String(l.msg).startsWith('too many invalid keys')).map((l) => [l.level, l.limit]),
    ).toEqual([[40, 3]]);
  } finally {
    await g.stop();
  }
});
