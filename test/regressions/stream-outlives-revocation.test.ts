/**
 * Regression (in-flight streams outlive revocation): after `keys revoke`, `instances
 * stop` or `remove`, a stream in flight went on for 17 tokens over 17 s and ended with [DONE]; one
 * started 0.3 s before the pack end relayed 13 tokens after it. Now a revocation or pack end ends
 * that key's work in flight (docs/contract.md §3, docs/security.md): a stream begun gets one error event
 * and no [DONE], an answer not begun is the error (401), and the upstream request is aborted.
 *
 * Streams here are 60 tokens at 5 a second (12 s): one that is not ended would run on for
 * seconds, so counting the tokens that arrive after the acknowledged action tells them apart.
 */
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest, Simulator } from '../../simulator/simulator.js';
import { hello } from '../helpers/chat.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { eventually } from '../helpers/processes.js';
import { type OpenStream, openChat, sseData, tokensIn } from '../helpers/raw-http.js';
import { type Harness, MODEL, startHarness, startSim } from '../reliability/harness.js';

const SLOW = '[[sim chunks=60 tokensPerSecond=5]]';
let sim: Simulator;
let simUrl: string;
let daemon: Harness;
let cli: InprocCli;

interface Key {
  id: string;
  secret: string;
}

beforeAll(async () => {
  ({ sim, url: simUrl } = await startSim());
  daemon = await startHarness();
  cli = inprocCli(daemon.daemon.management);
});

afterAll(async () => {
  await daemon?.stop();
  await sim?.close();
});

async function readyInstance(id: string, extra: string[] = []): Promise<Key> {
  await cli.json('instances', 'add', id, '--model', MODEL, '--endpoint', simUrl, ...extra);
  return (await cli.json<{ defaultKey: Key }>('instances', 'ready', id)).defaultKey;
}

function chat(tag: string, stream: boolean, directive = SLOW): Record<string, unknown> {
  return hello(MODEL, { stream, messages: [{ role: 'user', content: `${tag} ${directive}` }] });
}

async function upstream(tag: string): Promise<RecordedRequest> {
  return eventually(() => sim.requests.find((r) => JSON.stringify(r.body).includes(tag)), `upstream request ${tag}`);
}

/** The model server saw its connection closed before it had finished. */
async function expectUpstreamAborted(tag: string): Promise<void> {
  const r = await eventually(async () => {
    const got = await upstream(tag);
    return got.aborted ? got : undefined;
  }, `upstream ${tag} aborted`);
  expect(r.completed).toBe(false);
  expect(r.chunksSent).toBeLessThan(60);
}

function envelope(code: string): unknown {
  return { error: { message: expect.any(String), type: 'authentication_error', code, param: null } };
}

/** The whole stream: chunks, then exactly one error event, then nothing (no [DONE]). */
function expectEndedWithError(s: OpenStream, code: string): void {
  expect(s.status).toBe(200);
  const text = s.text();
  expect(text.endsWith('\n\n')).toBe(true);
  const data = sseData(text);
  expect(data).not.toContain('[DONE]');
  expect(JSON.parse(data.at(-1)!)).toEqual(envelope(code));
  for (const d of data.slice(0, -1)) expect((JSON.parse(d) as { object: string }).object).toBe('chat.completion.chunk');
}

function tokensAfter(s: OpenStream, at: number): number {
  return tokensIn(
    s.pieces
      .filter((p) => p.at > at)
      .map((p) => p.text)
      .join(''),
  );
}

async function startedStream(key: Key, tag: string): Promise<OpenStream> {
  const s = await openChat(daemon.baseUrl, key.secret, chat(tag, true));
  await eventually(() => tokensIn(s.text()) >= 2, 'the first tokens', 10_000);
  return s;
}

describe('a stream in flight ends with one error event when its key loses its rights', () => {
  const actions: [string, (id: string, key: Key) => Promise<unknown>][] = [
    ['keys revoke', (_id, key) => cli.json('keys', 'revoke', key.id)],
    ['instances stop', (id) => cli.json('instances', 'stop', id)],
    ['instances remove', (id) => cli.json('instances', 'remove', id)],
  ];
  for (const [action, act] of actions) {
    it(`${action}: revoked_api_key, no [DONE], no token after, upstream aborted`, async () => {
      const id = `st-${action.split(' ')[1]}`;
      const key = await readyInstance(id);
      const s = await startedStream(key, `tag-${id}`);
      await act(id, key);
      const acked = Date.now();
      await s.ended;
      expectEndedWithError(s, 'revoked_api_key');
      // At most a token already on the wire when the stream was ended.
      expect(tokensAfter(s, acked)).toBeLessThanOrEqual(1);
      await expectUpstreamAborted(`tag-${id}`);
    });
  }

  it('revoking one key leaves the other keys of the same deployment streaming to [DONE]', async () => {
    const key = await readyInstance('st-other');
    const other = await cli.json<Key & { secret: string }>(
      'keys',
      'create',
      '--instance',
      'st-other',
      '--name',
      'other',
    );
    const doomed = await startedStream(key, 'tag-st-doomed');
    const kept = await openChat(
      daemon.baseUrl,
      other.secret,
      chat('tag-st-kept', true, '[[sim chunks=10 tokensPerSecond=5]]'),
    );
    await cli.json('keys', 'revoke', key.id);
    await Promise.all([doomed.ended, kept.ended]);
    expectEndedWithError(doomed, 'revoked_api_key');
    const data = sseData(kept.text());
    expect(data.at(-1)).toBe('[DONE]');
    expect(tokensIn(kept.text())).toBe(10);
  });

  it('the official SDK raises the error mid-stream', async () => {
    const key = await readyInstance('st-sdk');
    const client = new OpenAI({ baseURL: `${daemon.baseUrl}/v1`, apiKey: key.secret, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: `tag-st-sdk ${SLOW}` }],
    });
    let tokens = 0;
    let revoked = false;
    const err = await (async () => {
      try {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) tokens++;
          if (tokens === 2 && !revoked) {
            revoked = true;
            await cli.json('keys', 'revoke', key.id);
          }
        }
        return null;
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).code).toBe('revoked_api_key');
    expect(tokens).toBeLessThan(10);
    await expectUpstreamAborted('tag-st-sdk');
  });
});

describe('an answer not begun is the error itself', () => {
  it('a plain request waiting for its answer: 401 revoked_api_key, upstream aborted', async () => {
    const key = await readyInstance('pl-revoke');
    const pending = openChat(daemon.baseUrl, key.secret, chat('tag-pl-revoke', false));
    await upstream('tag-pl-revoke');
    await cli.json('keys', 'revoke', key.id);
    const r = await pending;
    await r.ended;
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text())).toEqual(envelope('revoked_api_key'));
    await expectUpstreamAborted('tag-pl-revoke');
  });

  it('a stream whose first token has not come yet: 401 revoked_api_key, upstream aborted', async () => {
    const key = await readyInstance('pl-stop');
    const pending = openChat(daemon.baseUrl, key.secret, chat('tag-pl-stop', true, '[[sim firstTokenDelayMs=20000]]'));
    await upstream('tag-pl-stop');
    await cli.json('instances', 'stop', 'pl-stop');
    const r = await pending;
    await r.ended;
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text())).toEqual(envelope('revoked_api_key'));
    await expectUpstreamAborted('tag-pl-stop');
  });
});

it('the pack end ends a stream and a plain request in flight with pack_ended', async () => {
  const packEndsAt = Date.now() + 5_000;
  const key = await readyInstance('pack', ['--pack-ends', new Date(packEndsAt).toISOString()]);
  const s = await startedStream(key, 'tag-pack-stream');
  const plain = openChat(daemon.baseUrl, key.secret, chat('tag-pack-plain', false));
  await upstream('tag-pack-plain');
  expect(Date.now()).toBeLessThan(packEndsAt);
  await s.ended;
  expectEndedWithError(s, 'pack_ended');
  // Within the second promised, at 5 tokens a second; one not ended runs on for ~30 more.
  expect(tokensAfter(s, packEndsAt)).toBeLessThanOrEqual(5);
  const r = await plain;
  await r.ended;
  expect(r.status).toBe(401);
  expect(JSON.parse(r.text())).toEqual(envelope('pack_ended'));
  await expectUpstreamAborted('tag-pack-stream');
  await expectUpstreamAborted('tag-pack-plain');
});
