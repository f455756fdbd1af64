/**
 * Per-key limits, end to end: real `ob-proxy serve`, real `ob-proxy simulate`, the real CLI and
 * the `openai` SDK. A key over its rpm, tpm or concurrency is refused with 429 and the
 * x-ratelimit headers; `keys limit` applies at once; limits survive a restart. The rpm/tpm window
 * is shortened to 4 s (OB_PROXY_LIMIT_WINDOW_MS) so that the SDK's retry after the window takes
 * seconds.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { SECRET_PATTERN } from '../../src/domain/api-key.js';
import { UNCAPPED_RESERVE } from '../../src/services/key-limiter.js';
import { estimatePromptTokens } from '../../src/wire/prompt-estimate.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KeyJson, ask, chatsOf, rateLimited } from '../helpers/limited-chat.js';
import { type ServeProcess, type SimProcess, cliJson, eventually, runCli, startServe } from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';
import { MODEL } from '../helpers/store-home.js';

const WINDOW_MS = 4000;

/** What a request `ask` sends reserves against a tpm while its answer is under way: its prompt's estimate and a long answer. */
function reserved(content: string): number {
  const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }] });
  return estimatePromptTokens(Buffer.byteLength(body), { parts: 0, chars: 0 }) + UNCAPPED_RESERVE;
}

function rateHeaders(h: Headers): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const n of ['limit-requests', 'remaining-requests', 'limit-tokens', 'remaining-tokens'])
    out[n] = h.get(`x-ratelimit-${n}`);
  return out;
}

const RESET = /^(\d+ms|\d+(\.\d{1,3})?s|\d+m\d+(\.\d{1,3})?s)$/;

describe('per-key limits', () => {
  let home: string;
  let sim: SimProcess;
  let serve: ServeProcess;
  let dflt: { keyId: string; secret: string };
  const env = { OB_PROXY_LIMIT_WINDOW_MS: String(WINDOW_MS) };
  // A connection that was refused before its body was read keeps a drain waiting for the
  // client's keep-alive to end (also for a 401; not the subject here): stop in a second.
  const GRACE = ['--grace', '1', '--metrics-port', '0'];
  const limited = async (limit: string): Promise<number> => {
    const url = serve.logs().find((l) => l.msg === 'ob-proxy serving')!.metrics as string;
    const line = (await (await fetch(url)).text())
      .split('\n')
      .find((l) => l.startsWith(`ob_proxy_rate_limited_total{instance="gpu-1",limit="${limit}"} `));
    return line === undefined ? 0 : Number(line.split(' ')[1]);
  };

  beforeAll(async () => {
    const d = await startDaemonAndSim({ serveArgs: GRACE, env });
    ({ home, sim, serve } = d);
    dflt = { keyId: d.keys['gpu-1']!.id, secret: d.key };
  });
  afterAll(async () => {
    await serve?.stop();
    await sim?.stop();
  });

  it('a key over its rpm gets 429 with Retry-After and the x-ratelimit headers; the SDK retries after the window; other keys are not slowed', async () => {
    const bot = await cliJson<KeyJson>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'bot', '--rpm', '2', '--tpm', '100000'],
      home,
    );
    expect(bot.limits).toEqual({ rpm: 2, tpm: 100000, concurrency: null });
    const first = await ask(serve.baseUrl, bot.secret, 'one');
    expect(first.status).toBe(200);
    // Tokens are charged once the answer is known; until then the answer's reservation counts.
    expect(rateHeaders(first.headers)).toEqual({
      'limit-requests': '2',
      'remaining-requests': '1',
      'limit-tokens': '100000',
      'remaining-tokens': String(100000 - reserved('one')),
    });
    expect(first.headers.get('x-ratelimit-reset-requests')).toMatch(RESET);
    expect(first.headers.get('x-ratelimit-reset-tokens')).toBe('0ms');
    const usage = (first.json as { usage: { total_tokens: number } }).usage.total_tokens;
    const second = await ask(serve.baseUrl, bot.secret, 'two');
    expect(second.status).toBe(200);
    expect(rateHeaders(second.headers)).toEqual({
      'limit-requests': '2',
      'remaining-requests': '0',
      'limit-tokens': '100000',
      'remaining-tokens': String(100000 - usage - reserved('two')),
    });
    const upstreamBefore = (await chatsOf(sim)).length;

    const third = await ask(serve.baseUrl, bot.secret, 'three');
    expect(third.status).toBe(429);
    const wait = Number(third.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(WINDOW_MS / 1000);
    expect(Number(third.headers.get('retry-after-ms'))).toBeLessThanOrEqual(WINDOW_MS);
    expect(third.json).toEqual(
      rateLimited(
        `This API key is over its limit of 2 requests per minute (rpm). Retry in ${wait} s; the operator sets it with \`ob-proxy keys limit\`.`,
      ),
    );
    expect(rateHeaders(third.headers)).toEqual({
      'limit-requests': '2',
      'remaining-requests': '0',
      'limit-tokens': '100000',
      'remaining-tokens': String(100000 - 2 * usage),
    });
    expect(third.headers.get('x-ratelimit-reset-requests')).toMatch(RESET);

    // Another key of the instance, without limits: served at once, and no x-ratelimit headers.
    const other = await ask(serve.baseUrl, dflt.secret, 'neighbour');
    expect(other.status).toBe(200);
    expect([...other.headers.keys()].filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);

    // The SDK with its default retries: refused, waits what it was told, then served.
    const client = new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: bot.secret });
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'sdk' }] })
      .withResponse();
    expect(data.choices[0]!.message.content).toEqual(expect.any(String));
    expect(response.headers.get('x-ratelimit-remaining-requests')).toBe('1');
    // Refused requests never reached the model server: the neighbour's and the SDK's one did.
    const sent = (await chatsOf(sim))
      .slice(upstreamBefore)
      .map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content);
    expect(sent).toEqual(['neighbour', 'sdk']);
    // The SDK was refused once before its retry; one log line for the key's refusals in its window.
    expect(await limited('rpm')).toBe(2);
    await eventually(() => serve.logs().some((l) => l.key === bot.id && l.limit === 'rpm'), 'the over-limit line');
    expect(
      serve
        .logs()
        .filter(
          (l) =>
            l.key === bot.id && l.msg === 'key over its limit: refusing its requests with 429 until the window ends',
        )
        .map((l) => [l.limit, l.value]),
    ).toEqual([['rpm', 2]]);
  }, 30_000);

  it("the x-ratelimit headers come with the relay's answers too: a completion and a model server's error, next to their own headers", async () => {
    const k = await cliJson<KeyJson>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'both', '--rpm', '100', '--tpm', '100000'],
      home,
    );
    const ok = await ask(serve.baseUrl, k.secret, 'fine');
    expect(ok.status).toBe(200);
    expect(rateHeaders(ok.headers)).toEqual({
      'limit-requests': '100',
      'remaining-requests': '99',
      'limit-tokens': '100000',
      'remaining-tokens': String(100000 - reserved('fine')),
    });
    expect([ok.headers.get('x-ratelimit-reset-requests'), ok.headers.get('x-ratelimit-reset-tokens')]).toEqual([
      expect.stringMatching(RESET),
      '0ms',
    ]);
    expect([ok.headers.get('content-type'), ok.headers.get('x-request-id')]).toEqual([
      'application/json',
      expect.stringMatching(/^req_/),
    ]);
    const failed = await ask(serve.baseUrl, k.secret, '[[sim fail=http-error errorStatus=503]] x');
    expect(failed.status).toBe(503);
    expect(rateHeaders(failed.headers)).toMatchObject({
      'limit-requests': '100',
      'remaining-requests': '98',
      'limit-tokens': '100000',
    });
    expect(Number(failed.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(100000);
    expect([failed.headers.get('content-type'), failed.headers.get('x-request-id')]).toEqual([
      'application/json',
      expect.stringMatching(/^req_/),
    ]);
    expect((failed.json as { error: { code: string } }).error.code).toEqual(expect.any(String));
  });

  it('keys limit changes apply at once; tpm refuses the next request once the tokens are known; concurrency holds', async () => {
    const k = await cliJson<KeyJson>(['keys', 'create', '--instance', 'gpu-1', '--name', 'tight', '--rpm', '1'], home);
    expect((await ask(serve.baseUrl, k.secret, 'a')).status).toBe(200);
    expect((await ask(serve.baseUrl, k.secret, 'b')).status).toBe(429);
    const changed = await cliJson<KeyJson>(['keys', 'limit', k.id, '--rpm', 'none', '--tpm', '5'], home);
    expect(changed.limits).toEqual({ rpm: null, tpm: 5, concurrency: null });
    // An error after auth carries the headers, and so does a stream.
    const invalid = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${k.secret}` },
      body: JSON.stringify({ model: 'other', messages: [] }),
    });
    expect(invalid.status).toBe(400);
    expect([
      invalid.headers.get('x-ratelimit-limit-requests'),
      invalid.headers.get('x-ratelimit-limit-tokens'),
      invalid.headers.get('x-ratelimit-remaining-tokens'),
    ]).toEqual([null, '5', '5']);
    const stream = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${k.secret}` },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'streamed' }] }),
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect([
      stream.headers.get('x-ratelimit-limit-tokens'),
      stream.headers.get('x-ratelimit-remaining-tokens'),
      stream.headers.get('x-ratelimit-reset-tokens'),
      // Its prompt's estimate alone is past the tpm of 5: the stream reserved all of it.
    ]).toEqual(['5', '0', '0ms']);
    expect(await stream.text()).toMatch(/data: \[DONE\]\n\n$/);
    const over = await ask(serve.baseUrl, k.secret, 'd');
    expect(over.status).toBe(429);
    expect((over.json as { error: { message: string } }).error.message).toMatch(
      /^This API key is over its limit of 5 tokens per minute \(tpm\)\. Retry in \d s;/,
    );
    expect(over.headers.get('x-ratelimit-remaining-tokens')).toBe('0');

    await cliJson(['keys', 'limit', k.id, '--tpm', 'none', '--concurrency', '1'], home);
    const hold = new AbortController();
    const held = ask(serve.baseUrl, k.secret, '[[sim fail=hang]] held', hold.signal).catch(() => null);
    await eventually(
      async () => (await chatsOf(sim)).some((r) => JSON.stringify(r.body).includes('held')),
      'the held request upstream',
    );
    const second = await ask(serve.baseUrl, k.secret, 'e');
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('1');
    expect((second.json as { error: { message: string } }).error.message).toMatch(
      /limit of 1 requests at once \(concurrency\)/,
    );
    hold.abort();
    await held;
    await eventually(async () => (await ask(serve.baseUrl, k.secret, 'f')).status === 200, 'a slot of the key again');
    // One at a time on a kept-alive connection: each answer gives its slot back.
    for (const n of ['g', 'h', 'i']) expect((await ask(serve.baseUrl, k.secret, n)).status).toBe(200);
    // So does a request refused after its key was admitted (its body, here its model), and a
    // stream, whose slot is free once its answer is written, while the proxy may still be
    // reading what the model server sends after [DONE].
    for (let i = 0; i < 2; i++) {
      const wrong = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${k.secret}` },
        body: JSON.stringify({ model: 'qwen3.6:27b', messages: [{ role: 'user', content: 'j' }] }),
      });
      expect([wrong.status, ((await wrong.json()) as { error: { code: string } }).error.code]).toEqual([
        400,
        'model_mismatch',
      ]);
      const streamed = await fetch(`${serve.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${k.secret}` },
        // The model server keeps its body open after [DONE]: the proxy drains it for up to a second.
        body: JSON.stringify({
          model: MODEL,
          stream: true,
          messages: [{ role: 'user', content: 'k [[sim fail=hang-after-done]]' }],
        }),
      });
      expect(streamed.status).toBe(200);
      expect(await streamed.text()).toMatch(/data: \[DONE\]\n\n$/);
    }
    expect((await ask(serve.baseUrl, k.secret, 'l')).status).toBe(200);

    expect([await limited('rpm'), await limited('tpm')]).toEqual([3, 1]);
    expect(await limited('concurrency')).toBeGreaterThanOrEqual(1);

    // Usage errors name the flag and exit 2.
    const bad = await runCli(['keys', 'limit', k.id, '--rpm', '0'], { home });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--rpm must be a whole number from 1 to 1000000000, or none; got "0"/);
    const none = await runCli(['keys', 'limit', k.id], { home });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/Give at least one of --rpm, --tpm, --concurrency/);
    const table = await runCli(['keys', 'list', '--instance', 'gpu-1'], { home });
    expect(table.stdout).toMatch(/LIMITS/);
    expect(table.stdout).toMatch(/concurrency 1/);
    expect(table.stdout).toMatch(/rpm 2 · tpm 100000/);
    // No secret in any log line, the new ones included.
    expect(serve.lines.join('\n')).not.toMatch(SECRET_PATTERN);
    expect(serve.lines.some((l) => l.includes(k.secret))).toBe(false);
    // The audit trail, in the log too (its pipe may lag the answer).
    await eventually(
      () => serve.logs().filter((l) => l.audit === 'key.limited' && l.key === k.id).length === 2,
      'the audit lines',
    );
    expect(
      serve
        .logs()
        .filter((l) => l.audit === 'key.limited' && l.key === k.id)
        .map((l) => l.limits),
    ).toEqual([
      { rpm: null, tpm: 5, concurrency: null },
      { rpm: null, tpm: null, concurrency: 1 },
    ]);
  }, 30_000);

  it('limits survive a restart, and a store written before limits existed loads with none', async () => {
    const before = await cliJson<(KeyJson & { name: string })[]>(['keys', 'list'], home);
    await serve.stop();
    serve = await startServe(home, GRACE, env);
    const after = await cliJson<(KeyJson & { name: string })[]>(['keys', 'list'], home);
    expect(after.map((k) => [k.name, k.limits])).toEqual(before.map((k) => [k.name, k.limits]));
    expect(after.find((k) => k.name === 'bot')!.limits).toEqual({ rpm: 2, tpm: 100000, concurrency: null });

    await serve.stop();
    const file = join(home, 'db.json');
    const data = JSON.parse(await readFile(file, 'utf8')) as { keys: Record<string, unknown>[] };
    for (const k of data.keys) delete k.limits;
    await writeFile(file, JSON.stringify(data));
    serve = await startServe(home, GRACE, env);
    const old = await cliJson<KeyJson[]>(['keys', 'list'], home);
    expect(old.map((k) => k.limits)).toEqual(old.map(() => ({ rpm: null, tpm: null, concurrency: null })));
    expect(old.map((k) => k.id)).toEqual(after.map((k) => k.id));
    expect((await ask(serve.baseUrl, dflt.secret, 'still served')).status).toBe(200);
  }, 30_000);
});
