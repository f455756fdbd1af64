/**
 * Regression (hostile model server): the token counts a model server reports
 * were trusted. A plain answer's usage was kept when it was any finite number ≥ 0 (a fraction, or
 * 1e308, which two answers turn into Infinity); a stream's usage chunk was kept as it came, so a
 * string ("100"), a negative number or 1e308 went into the key's counters (string concatenation:
 * `0` + `"100"` is `"0100"`), its tokens-per-minute window (a string there blocked or freed the
 * key at random; a negative prompt count credited its budget), the metrics and `ob-proxy usage`.
 * The next flush wrote `"0100"`, `null` (Infinity) or `0.5` into db.json, and the daemon then
 * refused to start on its own store (store validation); on PostgreSQL the flush failed for ever
 * (NOT NULL / bigint), taking every other key's counts of that daemon with it.
 * Now one function (safeTokenCount) turns a reported count into a token count: a whole number
 * from 0 to MAX_EXCHANGE_TOKENS, anything else is "not reported" (a plain answer's completion
 * counts 0, a stream's its content events, as when the usage chunk is absent; the prompt is
 * charged its estimate, prompt-estimate.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { type RawUpstream, startRawUpstream } from '../helpers/hostile-upstream.js';
import { type TestDatabase, freshDatabase } from '../helpers/postgres.js';
import { type Harness, MODEL, chatBody, post, readyInstance, startHarness } from '../reliability/harness.js';

/** Usage texts a model server may send, each written as raw JSON (so 1e308 stays 1e308). */
const HOSTILE = [
  '{"prompt_tokens":1e308,"completion_tokens":1e308,"total_tokens":1e308}',
  '{"prompt_tokens":0.5,"completion_tokens":2.25}',
  '{"prompt_tokens":"100","completion_tokens":"5"}',
  '{"prompt_tokens":-1000,"completion_tokens":-7}',
  '{"prompt_tokens":9007199254740991,"completion_tokens":9007199254740991}',
  '{"prompt_tokens":3,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1e308}}',
  '{"prompt_tokens":null,"completion_tokens":[1],"completion_tokens_details":{"reasoning_tokens":-1}}',
];
const SANE = '{"prompt_tokens":3,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}}';

/**
 * A model server that answers every chat with one content token and the usage text named by the
 * request's last message (`usage:<json>`), plainly or as a stream (a content event, a usage
 * chunk, [DONE]).
 */
function usageServer(): Promise<RawUpstream> {
  return startRawUpstream(({ stream, content }) => {
    const usage = content.slice('usage:'.length);
    const body = stream
      ? `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}\n\n` +
        `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[],"usage":${usage}}\n\n` +
        'data: [DONE]\n\n'
      : `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":${usage}}`;
    return { body };
  });
}

interface Counts {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  errors: number;
  disconnects: number;
}

async function keyUsage(h: Harness): Promise<Counts> {
  const report = await new DaemonClient(h.config.socket).usage({});
  const row = report.packs[0]?.keys[0];
  if (row === undefined) throw new Error('no key in the usage report');
  const { requests, promptTokens, completionTokens, reasoningTokens, errors, disconnects } = row;
  return { requests, promptTokens, completionTokens, reasoningTokens, errors, disconnects };
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

describe.each([
  ['lowdb', false],
  ['PostgreSQL', true],
] as const)('%s store', (_name, onPostgres) => {
  it('hostile usage counts as not reported, in plain answers and streams; the daemon starts again on its store', async () => {
    const up = await usageServer();
    cleanup.push(() => up.close());
    const db: TestDatabase | null = onPostgres ? await freshDatabase() : null;
    if (db !== null) cleanup.push(() => db.drop());
    const storePatch = db === null ? {} : { store: db.url };
    let h = await startHarness(storePatch);
    let running = true;
    cleanup.push(async () => {
      if (running) await h.stop();
    });
    const secret = await readyInstance(h, 'gpu-1', up.url);
    const keyId = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!.id;
    // A tpm limit on a shared store gives a daemon just started no share for a few periods: the
    // window is checked on lowdb, where it is this daemon's alone.
    if (!onPostgres) await h.daemon.ctx.lifecycle.setKeyLimits(keyId, { tpm: 1000 });

    for (const usage of [...HOSTILE, SANE]) {
      for (const stream of [false, true]) {
        const r = await post(h.baseUrl, secret, chatBody(`usage:${usage}`, { stream }));
        expect({ usage, stream, status: r.status }).toEqual({ usage, stream, status: 200 });
      }
    }
    // Counted per exchange: a sane usage as reported; a hostile one as not reported: the prompt
    // then charged its estimate (a quarter of the request's length: prompt-estimate.ts; a stream
    // goes up with the 40 characters of the usage option spliced in), the completion 0 in a plain
    // answer and its one content event in a stream. The sixth hostile text has sane prompt and
    // completion counts: only its reasoning count is refused.
    const estimate = (usage: string, stream: boolean): number =>
      Math.ceil((Buffer.byteLength(JSON.stringify(chatBody(`usage:${usage}`, { stream }))) + (stream ? 40 : 0)) / 4);
    const hostilePrompts = HOSTILE.filter((_, i) => i !== 5).reduce(
      (sum, u) => sum + estimate(u, false) + estimate(u, true),
      0,
    );
    const hostilePlain = { completion: 0 };
    const hostileStream = { completion: 1 };
    const expected: Counts = {
      requests: 2 * (HOSTILE.length + 1),
      promptTokens: hostilePrompts + 2 * 3 + 2 * 3,
      completionTokens: (HOSTILE.length - 1) * (hostilePlain.completion + hostileStream.completion) + 2 * 2 + 2 * 2,
      reasoningTokens: 2 * 1,
      errors: 0,
      disconnects: 0,
    };
    expect(await keyUsage(h)).toEqual(expected);
    // The tokens-per-minute window holds the same whole number: the next answer's headers say so
    // (with what that answer reserved while it was written: its prompt's estimate and its cap).
    const next = await post(h.baseUrl, secret, chatBody(`usage:${SANE}`, { max_tokens: 1 }));
    const reserved = Math.ceil(Buffer.byteLength(JSON.stringify(chatBody(`usage:${SANE}`, { max_tokens: 1 }))) / 4) + 1;
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe(
      onPostgres ? undefined : String(1000 - expected.promptTokens - expected.completionTokens - reserved),
    );
    expected.requests += 1;
    expected.promptTokens += 3;
    expected.completionTokens += 2;
    expected.reasoningTokens += 1;

    // Flushed at shutdown; a daemon on the same store starts and reads the same counters.
    await h.stop();
    running = false;
    h = await startHarness(storePatch, { home: h.home });
    running = true;
    expect(await keyUsage(h)).toEqual(expected);
  });
});
