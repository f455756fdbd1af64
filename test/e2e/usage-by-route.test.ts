/**
 * `ob-proxy usage --json` splits a key's usage by the client API it came through, with the real
 * daemon in front of the simulator: one key used through /v1/chat/completions, /v1/responses
 * (plain and streamed) and /v1/messages shows exactly those requests and the model server's own
 * token counts per route, the totals their sum; the split survives a restart (the flush at
 * SIGTERM, then a reload of the lowdb store).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, type SimProcess, cliJson, eventually, startServe } from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';

const MODEL = 'gemma4:26b';

interface Split {
  requests: number;
  promptTokens: number;
  completionTokens: number;
}
interface Row {
  id: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  byRoute: Record<string, Split>;
}
interface Report {
  packs: { keys: Row[]; total: Row }[];
}

let home: string;
let serve: ServeProcess;
let sim: SimProcess;
let keyId: string;
const expected: Record<string, Split> = {};

function charge(route: string, prompt: number, completion: number): void {
  const r = (expected[route] ??= { requests: 0, promptTokens: 0, completionTokens: 0 });
  r.requests += 1;
  r.promptTokens += prompt;
  r.completionTokens += completion;
}

async function post(path: string, secret: string, body: unknown): Promise<Response> {
  return fetch(`${serve.baseUrl}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secret}`,
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify(body),
  });
}

type Usage = Record<string, number>;

beforeAll(async () => {
  const d = await startDaemonAndSim({ serveArgs: ['--probe-interval', '0'] });
  ({ home, sim, serve } = d);
  const key = d.keys['gpu-1']!;
  keyId = key.id;
  const hi = [{ role: 'user', content: 'hello there' }];

  for (const content of ['one', 'one two three four']) {
    const r = await post('/v1/chat/completions', key.secret, { model: MODEL, messages: [{ role: 'user', content }] });
    expect(r.status).toBe(200);
    const u = ((await r.json()) as { usage: Usage }).usage;
    charge('chat', u.prompt_tokens!, u.completion_tokens!);
  }
  const plain = await post('/v1/responses', key.secret, { model: MODEL, input: 'Say hello' });
  expect(plain.status).toBe(200);
  const pu = ((await plain.json()) as { usage: Usage }).usage;
  charge('responses', pu.input_tokens!, pu.output_tokens!);
  const streamed = await post('/v1/responses', key.secret, { model: MODEL, input: 'Say hello twice', stream: true });
  expect(streamed.status).toBe(200);
  const completed = (await streamed.text())
    .split('\n\n')
    .flatMap((frame) => frame.split('\n').filter((l) => l.startsWith('data: ')))
    .map((l) => JSON.parse(l.slice(6)) as { type: string; response?: { usage: Usage } })
    .find((e) => e.type === 'response.completed')!;
  charge('responses', completed.response!.usage.input_tokens!, completed.response!.usage.output_tokens!);
  const msg = await post('/v1/messages', key.secret, { model: MODEL, max_tokens: 64, messages: hi });
  expect(msg.status).toBe(200);
  const mu = ((await msg.json()) as { usage: Usage }).usage;
  charge('messages', mu.input_tokens!, mu.output_tokens!);
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

function totalsOf(split: Record<string, Split>): Split {
  const t = { requests: 0, promptTokens: 0, completionTokens: 0 };
  for (const r of Object.values(split)) {
    t.requests += r.requests;
    t.promptTokens += r.promptTokens;
    t.completionTokens += r.completionTokens;
  }
  return t;
}

describe('ob-proxy usage --json by route', () => {
  it('shows exactly the requests and tokens of each route, and totals that are their sum', async () => {
    expect(expected.chat!.requests).toBe(2);
    expect(expected.responses!.requests).toBe(2);
    expect(expected.messages!.requests).toBe(1);
    for (const r of Object.values(expected)) expect(r.promptTokens).toBeGreaterThan(0);
    // The streamed answer's usage is counted when its relay ends, after the client has it.
    const report = await eventually(async () => {
      const r = await cliJson<Report>(['usage', '--json'], home);
      const row = r.packs[0]?.keys.find((k) => k.id === keyId);
      return row?.byRoute.messages === undefined ||
        row.byRoute.responses?.completionTokens !== expected.responses!.completionTokens
        ? undefined
        : r;
    }, 'every exchange counted');
    const row = report.packs[0]!.keys.find((k) => k.id === keyId)!;
    expect(row.byRoute).toEqual(expected);
    expect(Object.keys(row.byRoute)).toEqual(['chat', 'responses', 'messages']);
    expect(row).toMatchObject(totalsOf(expected));
    expect(report.packs[0]!.total.byRoute).toEqual(expected);
  });

  it('the split survives a restart', async () => {
    expect(await serve.stop()).toBe(0);
    serve = await startServe(home, ['--probe-interval', '0']);
    const report = await cliJson<Report>(['usage', '--key', keyId], home);
    expect(report.packs[0]!.keys[0]!.byRoute).toEqual(expected);
  });
});
