/**
 * `ob-proxy usage`: after a known mix of requests through the real daemon (plain,
 * streamed, an upstream error, a client that leaves, reasoning reported by the model server),
 * the report shows exactly those counts per key and per pack, with the pack's total; counters
 * survive a restart, and a store written before they existed loads with them at zero. The
 * filters (--key, --instance, --since) and their refusals are in test/inproc/cli-usage-filters.test.ts.
 */
import type { Server } from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hello, postChat } from '../helpers/chat.js';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  eventually,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';
import { reasoningServer } from '../helpers/reasoning-server.js';

const GEMMA = 'gemma4:26b';
const QWEN = 'qwen3.6:27b';

interface Counts {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  estimatedTokens: number;
  errors: number;
  disconnects: number;
  firstUsedAt: string | null;
  lastUsedAt: string | null;
  byRoute: Record<string, { requests: number; promptTokens: number; completionTokens: number }>;
}
interface KeyRow extends Counts {
  id: string;
  name: string;
  status: string;
}
interface Pack {
  instance: string;
  deployment: string;
  model: string | null;
  state: string;
  packEndsAt: string | null;
  keys: KeyRow[];
  total: Counts;
}
interface Report {
  since: string | null;
  packs: Pack[];
}

/** Every request of this file goes through chat completions: the split is the totals, under `chat`. */
function chatOnly(requests: number, promptTokens: number, completionTokens: number): Counts['byRoute'] {
  return requests === 0 ? {} : { chat: { requests, promptTokens, completionTokens } };
}

function sumOf(rows: Counts[]): Omit<Counts, 'firstUsedAt' | 'lastUsedAt' | 'byRoute'> {
  const t = {
    requests: 0,
    promptTokens: 0,
    completionTokens: 0,
    reasoningTokens: 0,
    estimatedTokens: 0,
    errors: 0,
    disconnects: 0,
  };
  for (const r of rows) for (const k of Object.keys(t) as (keyof typeof t)[]) t[k] += r[k];
  return t;
}

describe('ob-proxy usage', () => {
  let home: string;
  let serve: ServeProcess;
  let sim: SimProcess;
  let reasoning: { url: string; server: Server };
  const ids: Record<string, string> = {};
  let before: Report;

  beforeAll(async () => {
    home = await tmpHome();
    sim = await startSimulate([GEMMA]);
    reasoning = await reasoningServer(QWEN);
    serve = await startServe(home, ['--probe-interval', '0', '--metrics-port', '0']);
    await cliJson(
      ['instances', 'add', 'gpu-1', '--model', GEMMA, '--endpoint', sim.url, '--pack-ends', '2099-01-01T00:00:00Z'],
      home,
    );
    const d1 = (await cliJson<{ defaultKey: { id: string; secret: string } }>(['instances', 'ready', 'gpu-1'], home))
      .defaultKey;
    const bot = await cliJson<{ id: string; secret: string }>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'ci-bot'],
      home,
    );
    const idle = await cliJson<{ id: string }>(['keys', 'create', '--instance', 'gpu-1', '--name', 'idle'], home);
    await cliJson(['instances', 'add', 'gpu-2', '--model', QWEN, '--endpoint', reasoning.url], home);
    const d2 = (await cliJson<{ defaultKey: { id: string; secret: string } }>(['instances', 'ready', 'gpu-2'], home))
      .defaultKey;
    Object.assign(ids, { d1: d1.id, bot: bot.id, idle: idle.id, d2: d2.id });

    // gpu-1's default key: two plain answers, a stream with its usage, an error from the model server.
    const p1 = await postChat(serve.baseUrl, d1.secret, hello(GEMMA));
    const p2 = await postChat(
      serve.baseUrl,
      d1.secret,
      hello(GEMMA, { messages: [{ role: 'user', content: 'one two three four' }] }),
    );
    const s1 = await postChat(
      serve.baseUrl,
      d1.secret,
      hello(GEMMA, { stream: true, stream_options: { include_usage: true } }),
    );
    const e1 = await postChat(
      serve.baseUrl,
      d1.secret,
      hello(GEMMA, { messages: [{ role: 'user', content: '[[sim fail=http-error]]' }] }),
    );
    expect([p1.status, p2.status, s1.status, e1.status]).toEqual([200, 200, 200, 500]);
    const streamUsage = JSON.parse(
      s1.text
        .split('\n\n')
        .filter((f) => f.includes('"usage"'))
        .at(-1)!
        .slice(6),
    ) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const u = [p1, p2]
      .map((r) => (r.json as { usage: { prompt_tokens: number; completion_tokens: number } }).usage)
      .concat(streamUsage.usage);
    expected.d1 = {
      prompt: u.reduce((n, x) => n + x.prompt_tokens, 0),
      completion: u.reduce((n, x) => n + x.completion_tokens, 0),
    };

    // ci-bot leaves before the (slow) answer comes: the model server had its prompt and never
    // counted it, so it is charged its estimate (a quarter of the body's length: prompt-estimate.ts).
    const botBody = JSON.stringify(
      hello(GEMMA, { messages: [{ role: 'user', content: 'slow [[sim firstTokenDelayMs=10000]]' }] }),
    );
    expected.bot = { prompt: Math.ceil(Buffer.byteLength(botBody) / 4), completion: 0 };
    const ac = new AbortController();
    const left = fetch(`${serve.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      headers: { authorization: `Bearer ${bot.secret}`, 'content-type': 'application/json' },
      body: botBody,
    }).catch(() => 'aborted');
    await eventually(
      async () => (await sim.requests()).some((r) => JSON.stringify(r.body).includes('slow [[sim')),
      'the slow request upstream',
    );
    ac.abort();
    expect(await left).toBe('aborted');
    await eventually(
      async () => (await sim.requests()).some((r) => JSON.stringify(r.body).includes('slow [[sim') && r.aborted),
      'the upstream request aborted',
    );

    // gpu-2's default key: reasoning reported apart, plain and streamed.
    expect((await postChat(serve.baseUrl, d2.secret, hello(QWEN))).status).toBe(200);
    expect((await postChat(serve.baseUrl, d2.secret, hello(QWEN, { stream: true }))).status).toBe(200);
  });

  afterAll(async () => {
    await serve.stop();
    await sim.stop();
    reasoning.server.close();
  });

  const expected: Record<string, { prompt: number; completion: number }> = {};

  it('counts each key and totals each pack', async () => {
    const report = await eventually(async () => {
      const r = await cliJson<Report>(['usage'], home);
      return r.packs[0]?.keys.find((k) => k.name === 'ci-bot')?.disconnects === 1 ? r : undefined;
    }, 'the disconnect to be counted');
    const at = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // Its completion too: the instance's pace times the few milliseconds the model server had the
    // request before the client left (prompt-estimate.ts); a real clock, so read, and bounded.
    const botCompletion = report.packs[0]!.keys.find((k) => k.name === 'ci-bot')!.completionTokens;
    expect(Number.isSafeInteger(botCompletion) && botCompletion >= 0 && botCompletion < 1000).toBe(true);
    expected.bot!.completion = botCompletion;
    const d1: KeyRow = {
      id: ids.d1!,
      name: 'default',
      status: 'active',
      requests: 4,
      promptTokens: expected.d1!.prompt,
      completionTokens: expected.d1!.completion,
      reasoningTokens: 0,
      // Every count of its answers was the model server's (its error counted none).
      estimatedTokens: 0,
      errors: 1,
      disconnects: 0,
      firstUsedAt: at,
      lastUsedAt: at,
      byRoute: chatOnly(4, expected.d1!.prompt, expected.d1!.completion),
    };
    const bot: KeyRow = {
      id: ids.bot!,
      name: 'ci-bot',
      status: 'active',
      requests: 1,
      promptTokens: expected.bot!.prompt,
      completionTokens: expected.bot!.completion,
      reasoningTokens: 0,
      // Neither was reported: both are the proxy's estimates, and the receipt says so.
      estimatedTokens: expected.bot!.prompt + expected.bot!.completion,
      errors: 0,
      disconnects: 1,
      firstUsedAt: at,
      lastUsedAt: at,
      byRoute: chatOnly(1, expected.bot!.prompt, expected.bot!.completion),
    };
    const idle: KeyRow = {
      id: ids.idle!,
      name: 'idle',
      status: 'active',
      requests: 0,
      promptTokens: 0,
      completionTokens: 0,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: null,
      lastUsedAt: null,
      byRoute: {},
    };
    const d2: KeyRow = {
      id: ids.d2!,
      name: 'default',
      status: 'active',
      requests: 2,
      promptTokens: 14,
      completionTokens: 40,
      reasoningTokens: 24,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: at,
      lastUsedAt: at,
      byRoute: chatOnly(2, 14, 40),
    };
    expect(report).toEqual({
      since: null,
      packs: [
        {
          instance: 'gpu-1',
          deployment: expect.any(String),
          model: GEMMA,
          state: 'ready',
          packEndsAt: '2099-01-01T00:00:00.000Z',
          keys: [d1, bot, idle],
          total: {
            ...sumOf([d1, bot, idle]),
            firstUsedAt: at,
            lastUsedAt: at,
            byRoute: chatOnly(
              5,
              expected.d1!.prompt + expected.bot!.prompt,
              expected.d1!.completion + expected.bot!.completion,
            ),
          },
        },
        {
          instance: 'gpu-2',
          deployment: expect.any(String),
          model: QWEN,
          state: 'ready',
          packEndsAt: null,
          keys: [d2],
          total: { ...sumOf([d2]), firstUsedAt: at, lastUsedAt: at, byRoute: chatOnly(2, 14, 40) },
        },
      ],
    });
    expect(expected.d1!.prompt).toBeGreaterThan(0);
    const [gpu1] = report.packs;
    const rows = gpu1!.keys;
    // The pack's first use is its earliest key's, its last use the latest.
    expect(gpu1!.total.firstUsedAt).toBe(rows[0]!.firstUsedAt);
    expect(gpu1!.total.lastUsedAt).toBe(rows[1]!.lastUsedAt);
    expect(rows[0]!.firstUsedAt! <= rows[0]!.lastUsedAt!).toBe(true);
    before = report;
  });

  it('the metrics count the reasoning and estimated tokens too, by instance and key', async () => {
    const metricsUrl = (serve.logs().find((l) => l.msg === 'ob-proxy serving') as { metrics: string }).metrics;
    const text = await (await fetch(metricsUrl)).text();
    const tokens = text
      .split('\n')
      .filter((l) => l.startsWith('ob_proxy_tokens_total{instance="gpu-2"'))
      .sort();
    expect(tokens).toEqual([
      `ob_proxy_tokens_total{instance="gpu-2",key="${ids.d2}",kind="completion"} 40`,
      `ob_proxy_tokens_total{instance="gpu-2",key="${ids.d2}",kind="prompt"} 14`,
      `ob_proxy_tokens_total{instance="gpu-2",key="${ids.d2}",kind="reasoning"} 24`,
    ]);
    expect(text).not.toMatch(/kind="reasoning".*instance="gpu-1"|instance="gpu-1".*kind="reasoning"/);
    // Only ci-bot's tokens were charged by estimate: one series, its receipt's figure.
    expect(text.split('\n').filter((l) => l.includes('kind="estimated"'))).toEqual([
      `ob_proxy_tokens_total{instance="gpu-1",key="${ids.bot}",kind="estimated"} ${expected.bot!.prompt + expected.bot!.completion}`,
    ]);
  });

  it('prints a table per pack with its total', async () => {
    const r = await runCli(['usage', '--instance', 'gpu-1'], { home });
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      new RegExp(`^Instance gpu-1, deployment \\S+ \\(${GEMMA}, ready, pack ends 2099-01-01T00:00:00.000Z\\)$`),
    );
    expect(lines[1]).toMatch(
      /^KEY\s+NAME\s+STATUS\s+REQUESTS\s+PROMPT\s+COMPLETION\s+REASONING\s+ESTIMATED\s+ERRORS\s+DISCONNECTS\s+FIRST USE\s+LAST USE$/,
    );
    expect(lines[2]).toMatch(
      new RegExp(
        `^${ids.d1}\\s+default\\s+active\\s+4\\s+${expected.d1!.prompt}\\s+${expected.d1!.completion}\\s+0\\s+0\\s+1\\s+0\\s+\\S+Z\\s+\\S+Z$`,
      ),
    );
    expect(lines[4]).toMatch(
      new RegExp(`^${ids.idle}\\s+idle\\s+active\\s+0\\s+0\\s+0\\s+0\\s+0\\s+0\\s+0\\s+-\\s+-$`),
    );
    expect(lines[5]).toMatch(
      new RegExp(
        `^TOTAL\\s+3 keys\\s+5\\s+${expected.d1!.prompt + expected.bot!.prompt}\\s+${expected.d1!.completion + expected.bot!.completion}\\s+0\\s+${expected.bot!.prompt + expected.bot!.completion}\\s+1\\s+1\\s+\\S+Z\\s+\\S+Z$`,
      ),
    );
    // The split by route, under the pack: every request here went through chat completions.
    expect(lines.slice(6)).toEqual([
      'By route',
      'KEY           ROUTE  REQUESTS  PROMPT  COMPLETION',
      expect.stringMatching(new RegExp(`^${ids.d1}  chat   4 +${expected.d1!.prompt} +${expected.d1!.completion}$`)),
      expect.stringMatching(new RegExp(`^${ids.bot}  chat   1 +${expected.bot!.prompt} +${expected.bot!.completion}$`)),
      expect.stringMatching(
        new RegExp(
          `^TOTAL         chat   5 +${expected.d1!.prompt + expected.bot!.prompt} +${expected.d1!.completion + expected.bot!.completion}$`,
        ),
      ),
    ]);
  });

  it('a removed pack keeps its receipt; counters survive a restart; an older store loads with the new counters at zero', async () => {
    await cliJson(['instances', 'remove', 'gpu-2', '--yes'], home);
    const removed = (await cliJson<Report>(['usage', '--instance', 'gpu-2'], home)).packs[0]!;
    expect(removed).toEqual({
      ...before.packs[1],
      state: 'removed',
      model: null,
      keys: [{ ...before.packs[1]!.keys[0], status: 'revoked' }],
    });

    // SIGTERM flushes what is in memory.
    expect(await serve.stop()).toBe(0);
    serve = await startServe(home, ['--probe-interval', '0']);
    const again = await cliJson<Report>(['usage'], home);
    expect(again.packs[0]).toEqual(before.packs[0]);
    expect(again.packs[1]).toEqual(removed);

    // A store written before these counters existed: the old ones kept, the new ones 0 / null,
    // the split by route empty.
    expect(await serve.stop()).toBe(0);
    const file = join(home, 'db.json');
    const db = JSON.parse(await readFile(file, 'utf8')) as { keys: { id: string; usage: Record<string, unknown> }[] };
    for (const k of db.keys)
      k.usage = {
        requests: k.usage.requests,
        promptTokens: k.usage.promptTokens,
        completionTokens: k.usage.completionTokens,
      };
    await writeFile(file, JSON.stringify(db));
    serve = await startServe(home, ['--probe-interval', '0']);
    const old = (await cliJson<Report>(['usage', '--key', ids.d1!], home)).packs[0]!.keys[0]!;
    expect(old).toEqual({
      ...before.packs[0]!.keys[0],
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: null,
      byRoute: {},
    });
  });
});
