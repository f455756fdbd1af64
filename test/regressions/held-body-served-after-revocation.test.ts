/**
 * Regression (checked before the body, served after): the key was checked in
 * onRequest only, against the instance as it was when the headers arrived. A client that sent
 * its headers, waited for `keys revoke`, `instances stop`, `terminate`, `remove` or the pack end,
 * then sent its body, was forwarded and answered 200. Checks 2 to 5 now hold when the request is
 * sent upstream (docs/contract.md §3), in the contract's order, against the instance as it is then.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { hello } from '../helpers/chat.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { eventually } from '../helpers/processes.js';
import { type HeldRequest, type RawResponse, holdBody } from '../helpers/raw-http.js';
import { type Harness, MODEL, startHarness, startSim } from '../reliability/harness.js';

let sim: { sim: Simulator; url: string };
let other: { sim: Simulator; url: string };
let d: Harness;
let cli: InprocCli;

interface ReadyJson {
  defaultKey: { id: string; secret: string };
}

beforeAll(async () => {
  [sim, other] = await Promise.all([startSim(), startSim()]);
  d = await startHarness();
  cli = inprocCli(d.daemon.management);
});

afterAll(async () => {
  await d?.stop();
  await Promise.all([sim?.sim.close(), other?.sim.close()]);
});

async function readyInstance(id: string, extra: string[] = []): Promise<ReadyJson['defaultKey']> {
  await cli.json('instances', 'add', id, '--model', MODEL, '--endpoint', sim.url, ...extra);
  return (await cli.json<ReadyJson>('instances', 'ready', id)).defaultKey;
}

function body(tag: string): string {
  return JSON.stringify(hello(MODEL, { messages: [{ role: 'user', content: `${tag} [[sim chunks=3]]` }] }));
}

function seenUpstream(s: { sim: Simulator }, tag: string): boolean {
  return s.sim.requests.some((r) => JSON.stringify(r.body).includes(tag));
}

/** The whole answer: status, our envelope, the request id, nothing else. */
function expectRefused(
  r: RawResponse,
  code: 'revoked_api_key' | 'deployment_not_found' | 'deployment_not_ready',
): void {
  expect(r.status).toBe(obError(code).status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.headers['x-request-id']).toMatch(/.+/);
  const b = JSON.parse(r.body) as { error: Record<string, unknown> };
  expect(b).toEqual({ error: { message: expect.any(String), type: obError(code).type, code, param: null } });
}

describe('a body sent after the key lost its rights is refused, and never reaches the model server', () => {
  const cases: [string, 'revoked_api_key' | 'deployment_not_found', (id: string, keyId: string) => Promise<unknown>][] =
    [
      ['keys revoke', 'revoked_api_key', (_id, keyId) => cli.json('keys', 'revoke', keyId)],
      ['instances stop', 'revoked_api_key', (id) => cli.json('instances', 'stop', id)],
      ['instances terminate', 'revoked_api_key', (id) => cli.json('instances', 'terminate', id)],
      ['instances fail', 'revoked_api_key', (id) => cli.json('instances', 'fail', id)],
      ['instances remove', 'deployment_not_found', (id) => cli.json('instances', 'remove', id)],
    ];
  for (const [action, code, act] of cases) {
    it(`${action} while the body is held: ${code}`, async () => {
      const id = `held-${action.split(' ')[1]}`;
      const key = await readyInstance(id);
      const tag = `tag-${id}`;
      const held: HeldRequest = await holdBody(d.baseUrl, key.secret, body(tag));
      await act(id, key.id);
      expectRefused(await held.send(), code);
      expect(seenUpstream(sim, tag)).toBe(false);
    });
  }

  it('a body sent after the pack ended: revoked_api_key', async () => {
    const packEndsAt = new Date(Date.now() + 3_000).toISOString();
    const key = await readyInstance('held-pack', ['--pack-ends', packEndsAt]);
    const held = await holdBody(d.baseUrl, key.secret, body('tag-held-pack'));
    await eventually(
      async () => (await cli.json<{ state: string }>('instances', 'show', 'held-pack')).state === 'stopped',
      'the pack end',
      10_000,
    );
    expectRefused(await held.send(), 'revoked_api_key');
    expect(seenUpstream(sim, 'tag-held-pack')).toBe(false);
  });

  it('a body sent after the instance went back to pending: deployment_not_ready', async () => {
    const key = await readyInstance('held-pending');
    const held = await holdBody(d.baseUrl, key.secret, body('tag-held-pending'));
    await cli.json('instances', 'pending', 'held-pending');
    expectRefused(await held.send(), 'deployment_not_ready');
    expect(seenUpstream(sim, 'tag-held-pending')).toBe(false);
  });

  it('the checks keep the contract order: a removed deployment is 404 even though its key is also revoked', async () => {
    const key = await readyInstance('held-order');
    const held = await holdBody(d.baseUrl, key.secret, '{not json');
    await cli.json('instances', 'remove', 'held-order');
    // Checks 3 and 4 come before the body's (check 6): not 400 invalid_json.
    expectRefused(await held.send(), 'deployment_not_found');
  });

  it('many held requests, one revocation: every one is refused', async () => {
    const key = await readyInstance('held-many');
    const helds = await Promise.all(
      Array.from({ length: 20 }, (_, i) => holdBody(d.baseUrl, key.secret, body(`tag-many-${i}-`))),
    );
    await cli.json('keys', 'revoke', key.id);
    const answers = await Promise.all(helds.map((h) => h.send()));
    for (const a of answers) expectRefused(a, 'revoked_api_key');
    expect(sim.sim.requests.some((r) => JSON.stringify(r.body).includes('tag-many-'))).toBe(false);
  });
});

it('a body sent after the instance moved to another endpoint goes to the new endpoint, not the old', async () => {
  const key = await readyInstance('held-moved');
  const held = await holdBody(d.baseUrl, key.secret, body('tag-held-moved'));
  await cli.json('instances', 'pending', 'held-moved');
  await cli.json('instances', 'ready', 'held-moved', '--endpoint', other.url);
  const r = await held.send();
  expect(r.status).toBe(200);
  expect((JSON.parse(r.body) as { object: string }).object).toBe('chat.completion');
  expect(seenUpstream(other, 'tag-held-moved')).toBe(true);
  expect(seenUpstream(sim, 'tag-held-moved')).toBe(false);
});
