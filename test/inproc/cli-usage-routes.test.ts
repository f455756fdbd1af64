/**
 * `ob-proxy usage` splits each key's usage by the client API it came through: `--json` has
 * `byRoute` per key and in each pack's total, and the table has a "By route" block under each
 * pack's table that fits 80 columns (docs/cli.md). In process: the CLI over `inject()` to a
 * never-listening daemon in front of the simulator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import type { UsageReport } from '../../src/wire/usage-report.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const AT = new Date(T0).toISOString();

let d: Inproc;
let sim: Simulator;
let cli: InprocCli;
let deployment: string;
const answers: { route: string; key: string; usage: Record<string, number> }[] = [];

async function post(path: string, secret: string, body: unknown): Promise<Record<string, number>> {
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: path,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode).toBe(200);
  return (JSON.parse(res.body) as { usage: Record<string, number> }).usage;
}

beforeAll(async () => {
  d = await buildInproc();
  let url: string;
  ({ sim, url } = await startSim());
  cli = inprocCli(d.daemon.management);
  await cli.json('instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', url);
  const first = (await cli.json<{ defaultKey: { secret: string } }>('instances', 'ready', 'gpu-1')).defaultKey;
  const bot = await cli.json<{ secret: string }>('keys', 'create', '--instance', 'gpu-1', '--name', 'bot');
  await cli.json('keys', 'create', '--instance', 'gpu-1', '--name', 'idle');
  deployment = d.daemon.ctx.lifecycle.registry.instances.get('gpu-1')!.deployment;
  const hi = [{ role: 'user', content: 'hi' }];
  for (let i = 0; i < 2; i++)
    answers.push({
      route: 'chat',
      key: 'first',
      usage: await post('/v1/chat/completions', first.secret, { model: MODEL, messages: hi }),
    });
  answers.push({
    route: 'responses',
    key: 'first',
    usage: await post('/v1/responses', first.secret, { model: MODEL, input: 'hi' }),
  });
  answers.push({
    route: 'messages',
    key: 'bot',
    usage: await post('/v1/messages', bot.secret, { model: MODEL, max_tokens: 32, messages: hi }),
  });
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

describe('ob-proxy usage by route', () => {
  it('--json: byRoute per key (only routes used) and per pack, the model server’s own counts', async () => {
    const report = await cli.json<UsageReport>('usage');
    const [first, bot, idle] = report.packs[0]!.keys;
    const of = (key: string, route: string) => {
      const mine = answers.filter((a) => a.key === key && a.route === route);
      return {
        requests: mine.length,
        promptTokens: mine.reduce((n, a) => n + (a.usage.prompt_tokens ?? a.usage.input_tokens!), 0),
        completionTokens: mine.reduce((n, a) => n + (a.usage.completion_tokens ?? a.usage.output_tokens!), 0),
      };
    };
    expect(first!.byRoute).toEqual({ chat: of('first', 'chat'), responses: of('first', 'responses') });
    expect(bot!.byRoute).toEqual({ messages: of('bot', 'messages') });
    expect(idle!.byRoute).toEqual({});
    expect(report.packs[0]!.total.byRoute).toEqual({
      chat: of('first', 'chat'),
      responses: of('first', 'responses'),
      messages: of('bot', 'messages'),
    });
    expect(of('first', 'chat')).toEqual({ requests: 2, promptTokens: 2, completionTokens: 16 });
  });

  it('the table: a "By route" block under the pack, a row per key and route used, then the pack per route', async () => {
    const r = await cli.run('usage');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    // The simulator's counts, as the JSON above showed them.
    expect(r.stdout).toBe(
      [
        `Instance gpu-1, deployment ${deployment} (gemma4:26b, ready)`,
        'KEY           NAME     STATUS  REQUESTS  PROMPT  COMPLETION  REASONING  ESTIMATED  ERRORS  DISCONNECTS  FIRST USE                 LAST USE',
        `k00000000001  default  active  3         3       24          0          0          0       0            ${AT}  ${AT}`,
        `k00000000002  bot      active  1         1       8           0          0          0       0            ${AT}  ${AT}`,
        'k00000000003  idle     active  0         0       0           0          0          0       0            -                         -',
        `TOTAL         3 keys           4         4       32          0          0          0       0            ${AT}  ${AT}`,
        'By route',
        'KEY           ROUTE      REQUESTS  PROMPT  COMPLETION',
        'k00000000001  chat       2         2       16',
        'k00000000001  responses  1         1       8',
        'k00000000002  messages   1         1       8',
        'TOTAL         chat       2         2       16',
        'TOTAL         responses  1         1       8',
        'TOTAL         messages   1         1       8',
        '',
      ].join('\n'),
    );
    const block = r.stdout.slice(r.stdout.indexOf('By route'));
    for (const line of block.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
  });
});
