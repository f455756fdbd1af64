/**
 * A 401 the operator can trace: a secret whose id part is well formed but whose tail is wrong
 * (cut, mistyped) is refused with the same answer as any bad key, and its `refused` log line names
 * that key id, and whether a key has it, never any other part of the secret. The answer sends
 * the renter to whoever gave them the key, not to a console they do not have.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.js';
import { BOT_SECRET } from '../helpers/counted-secrets.js';
import { type Inproc, MODEL, buildInproc } from '../helpers/inproc.js';

const HI = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };
const INVALID = {
  error: {
    message:
      'The API key is not valid. Check that it was copied whole; if it was, ask whoever gave you the key for a new one.',
    type: 'authentication_error',
    code: 'invalid_api_key',
    param: null,
  },
};

let d: Inproc;

beforeAll(async () => {
  d = await buildInproc();
  const lc = d.daemon.ctx.lifecycle;
  await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:9' });
  await (
    await lc.ready('gpu-1')
  ).defaultKey;
  expect((await lc.createKey('gpu-1', 'notebook')).secret).toBe(BOT_SECRET);
});

afterAll(async () => {
  await d?.close();
});

/** The `refused` lines logged since `from`, their fields but the time and request id. */
function refusedSince(from: number): Record<string, unknown>[] {
  return d.logs
    .slice(from)
    .filter((l) => l.msg === 'refused')
    .map(({ route, status, code, key, keyKnown }) => ({ route, status, code, key, keyKnown }));
}

it('a known id with a wrong tail: 401 as any bad key, the log names the key id and that it exists', async () => {
  const from = d.logs.length;
  const typo = `${BOT_SECRET.slice(0, -1)}${BOT_SECRET.endsWith('x') ? 'y' : 'x'}`;
  const answer = await d.chat(typo, HI);
  expect([answer.status, answer.json]).toEqual([401, INVALID]);
  expect(refusedSince(from)).toEqual([
    {
      route: 'POST /v1/chat/completions',
      status: 401,
      code: 'invalid_api_key',
      key: 'k00000000002',
      keyKnown: true,
    },
  ]);
  // Nothing of the secret past its id: not the random part, not the checksum.
  const logged = JSON.stringify(d.logs.slice(from));
  expect(logged).not.toContain(BOT_SECRET.slice(19, 27));
  expect(logged).not.toContain(typo.slice(-6));
});

it('an id no key has: named too, as unknown; a secret of another shape names none', async () => {
  const from = d.logs.length;
  const other = `ob_sk_ZZZZZZZZZZZZ_${'a'.repeat(38)}`;
  expect((await d.chat(other, HI)).json).toEqual(INVALID);
  expect((await d.chat(`${BOT_SECRET}0`, HI)).json).toEqual(INVALID);
  expect((await d.chat(BOT_SECRET.replace(/_r/, '-r'), HI)).json).toEqual(INVALID);
  expect(refusedSince(from)).toEqual([
    { route: 'POST /v1/chat/completions', status: 401, code: 'invalid_api_key', key: 'ZZZZZZZZZZZZ', keyKnown: false },
    { route: 'POST /v1/chat/completions', status: 401, code: 'invalid_api_key', key: undefined, keyKnown: undefined },
    { route: 'POST /v1/chat/completions', status: 401, code: 'invalid_api_key', key: undefined, keyKnown: undefined },
  ]);
});

it('no refusal a renter meets sends them to a console', () => {
  for (const [code, spec] of Object.entries(ERRORS)) expect(`${code}: ${spec.message}`).not.toMatch(/console/i);
});
