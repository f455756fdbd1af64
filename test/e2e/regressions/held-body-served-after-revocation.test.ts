/**
 * Regression (checked before the body, served after): the key was checked in
 * onRequest only, against the instance as it was when the headers arrived. A client that sent
 * its headers, waited for `keys revoke`, `instances stop`, `terminate`, `remove` or the pack end,
 * then sent its body, was forwarded and answered 200. Checks 2 to 5 now hold when the request is
 * sent upstream (docs/contract.md §3), in the contract's order, against the instance as it is then.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { obError } from '../../../src/errors.js';
import { hello } from '../../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  eventually,
  startServe,
  startSimulate,
  tmpHome,
} from '../../helpers/processes.js';
import { type HeldRequest, type RawResponse, holdBody } from '../../helpers/raw-http.js';

const MODEL = 'gemma4:26b';
let sim: SimProcess;
let other: SimProcess;
let serve: ServeProcess;
let home: string;

interface ReadyJson {
  defaultKey: { id: string; secret: string };
}

beforeAll(async () => {
  home = await tmpHome();
  [sim, other] = await Promise.all([startSimulate([MODEL]), startSimulate([MODEL])]);
  serve = await startServe(home);
});

afterAll(async () => {
  await serve?.stop();
  await Promise.all([sim?.stop(), other?.stop()]);
});

async function readyInstance(id: string, extra: string[] = []): Promise<ReadyJson['defaultKey']> {
  await cliJson(['instances', 'add', id, '--model', MODEL, '--endpoint', sim.url, ...extra], home);
  return (await cliJson<ReadyJson>(['instances', 'ready', id], home)).defaultKey;
}

function body(tag: string): string {
  return JSON.stringify(hello(MODEL, { messages: [{ role: 'user', content: `${tag} [[sim chunks=3]]` }] }));
}

async function seenUpstream(s: SimProcess, tag: string): Promise<boolean> {
  return (await s.requests()).some((r) => JSON.stringify(r.body).includes(tag));
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
      ['keys revoke', 'revoked_api_key', (_id, keyId) => cliJson(['keys', 'revoke', keyId], home)],
      ['instances stop', 'revoked_api_key', (id) => cliJson(['instances', 'stop', id], home)],
      ['instances terminate', 'revoked_api_key', (id) => cliJson(['instances', 'terminate', id], home)],
      ['instances fail', 'revoked_api_key', (id) => cliJson(['instances', 'fail', id], home)],
      ['instances remove', 'deployment_not_found', (id) => cliJson(['instances', 'remove', id], home)],
    ];
  for (const [action, code, act] of cases) {
    it(`${action} while the body is held: ${code}`, async () => {
      const id = `held-${action.split(' ')[1]}`;
      const key = await readyInstance(id);
      const tag = `tag-${id}`;
      const held: HeldRequest = await holdBody(serve.baseUrl, key.secret, body(tag));
      await act(id, key.id);
      expectRefused(await held.send(), code);
      expect(await seenUpstream(sim, tag)).toBe(false);
    });
  }

  it('a body sent after the pack ended: revoked_api_key', async () => {
    const packEndsAt = new Date(Date.now() + 3_000).toISOString();
    const key = await readyInstance('held-pack', ['--pack-ends', packEndsAt]);
    const held = await holdBody(serve.baseUrl, key.secret, body('tag-held-pack'));
    await eventually(
      async () => (await cliJson<{ state: string }>(['instances', 'show', 'held-pack'], home)).state === 'stopped',
      'the pack end',
      10_000,
    );
    expectRefused(await held.send(), 'revoked_api_key');
    expect(await seenUpstream(sim, 'tag-held-pack')).toBe(false);
  });

  it('a body sent after the instance went back to pending: deployment_not_ready', async () => {
    const key = await readyInstance('held-pending');
    const held = await holdBody(serve.baseUrl, key.secret, body('tag-held-pending'));
    await cliJson(['instances', 'pending', 'held-pending'], home);
    expectRefused(await held.send(), 'deployment_not_ready');
    expect(await seenUpstream(sim, 'tag-held-pending')).toBe(false);
  });

  it('the checks keep the contract order: a removed deployment is 404 even though its key is also revoked', async () => {
    const key = await readyInstance('held-order');
    const held = await holdBody(serve.baseUrl, key.secret, '{not json');
    await cliJson(['instances', 'remove', 'held-order'], home);
    // Checks 3 and 4 come before the body's (check 6): not 400 invalid_json.
    expectRefused(await held.send(), 'deployment_not_found');
  });

  it('many held requests, one revocation: every one is refused', async () => {
    const key = await readyInstance('held-many');
    const helds = await Promise.all(
      Array.from({ length: 20 }, (_, i) => holdBody(serve.baseUrl, key.secret, body(`tag-many-${i}-`))),
    );
    await cliJson(['keys', 'revoke', key.id], home);
    const answers = await Promise.all(helds.map((h) => h.send()));
    for (const a of answers) expectRefused(a, 'revoked_api_key');
    expect((await sim.requests()).some((r) => JSON.stringify(r.body).includes('tag-many-'))).toBe(false);
  });
});

it('a body sent after the instance moved to another endpoint goes to the new endpoint, not the old', async () => {
  const key = await readyInstance('held-moved');
  const held = await holdBody(serve.baseUrl, key.secret, body('tag-held-moved'));
  await cliJson(['instances', 'pending', 'held-moved'], home);
  await cliJson(['instances', 'ready', 'held-moved', '--endpoint', other.url], home);
  const r = await held.send();
  expect(r.status).toBe(200);
  expect((JSON.parse(r.body) as { object: string }).object).toBe('chat.completion');
  expect(await seenUpstream(other, 'tag-held-moved')).toBe(true);
  expect(await seenUpstream(sim, 'tag-held-moved')).toBe(false);
});
