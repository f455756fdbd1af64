/**
 * The simulator (`ob-proxy simulate`) against real Ollama v0.33.0-rc2, the server it stands for:
 * the same requests to both, and the same shapes back (test/helpers/wire-shape.ts): field sets
 * and JSON types, ids' formats, finish reasons, the order of a stream's kinds of events, and
 * which of them carry usage, with and without `stream_options.include_usage`. Each request is
 * chosen (its seed) so that the tiny real model does what the simulator's model does: says a few
 * words and stops, is cut at max_tokens, calls a tool at once, answers a tool result, writes JSON,
 * reasons. A difference is the simulator's to fix, and docs/compatibility.md's to record.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GEMMA, GET_TIME, JSON_SCHEMA_FORMAT, QWEN } from '../helpers/conformance-cases.js';
import { type SimProcess, startSimulate } from '../helpers/processes.js';
import { REALUP_SKIP, type RealServer, startOllama } from '../helpers/realup.js';
import { type Exchange, ROUTES, exchange } from '../helpers/wire-exchange.js';
import { signature, streamShape } from '../helpers/wire-shape.js';

type Body = Record<string, unknown>;

const user = (content: string): Body => ({ role: 'user', content });

const CASES: { name: string; body: Body }[] = [
  {
    name: 'a few words, then stop',
    body: { model: GEMMA, messages: [user('Hello')], temperature: 1, seed: 7, max_tokens: 50 },
  },
  {
    name: 'cut at max_tokens',
    body: { model: GEMMA, messages: [user('Hello')], temperature: 1, seed: 7, max_tokens: 3 },
  },
  {
    name: 'a tool call at once',
    body: {
      model: GEMMA,
      messages: [user('What time is it?')],
      tools: [GET_TIME],
      temperature: 1,
      seed: 28,
      max_tokens: 300,
    },
  },
  {
    name: 'the answer to a tool result',
    body: {
      model: GEMMA,
      messages: [
        user('What time is it?'),
        {
          role: 'assistant',
          content: '',
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
      ],
      tools: [GET_TIME],
      temperature: 1,
      seed: 7,
      max_tokens: 80,
    },
  },
  {
    name: 'json_schema',
    body: {
      model: GEMMA,
      messages: [user('Is it ok?')],
      temperature: 0,
      seed: 1,
      max_tokens: 40,
      response_format: JSON_SCHEMA_FORMAT,
    },
  },
  {
    name: 'reasoning (Gemma 4 template)',
    body: { model: QWEN, messages: [user('Hello')], temperature: 1, seed: 26, max_tokens: 80 },
  },
  // Routes the gateway will serve: their requests here, each against the simulator and Ollama.
];

const MODES = [
  { mode: 'plain', extra: {} },
  { mode: 'streamed', extra: { stream: true } },
  { mode: 'streamed with usage', extra: { stream: true, stream_options: { include_usage: true } } },
] as const;

const title =
  REALUP_SKIP === null
    ? 'the simulator answers as real Ollama does'
    : `the simulator's fidelity: skipped, ${REALUP_SKIP}`;

describe.skipIf(REALUP_SKIP !== null)(title, () => {
  let ollama: RealServer;
  const sims: Record<string, SimProcess> = {};
  /** Every event shape each side sent, over all cases. */
  const realShapes = new Set<string>();
  const simShapes = new Set<string>();

  beforeAll(async () => {
    [ollama, sims[GEMMA], sims[QWEN]] = await Promise.all([
      startOllama(),
      startSimulate([GEMMA]),
      startSimulate([QWEN], ['--reasoning']),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([ollama?.stop(), sims[GEMMA]?.stop(), sims[QWEN]?.stop()]);
  });

  const both = async (body: Body | string, model: string): Promise<[Exchange, Exchange]> => [
    await exchange(ollama.url, ROUTES.chat.path, body),
    await exchange(sims[model]!.url, ROUTES.chat.path, body),
  ];

  const cases = CASES.flatMap((c) => MODES.map((m) => ({ ...c, ...m })));
  it.each(cases)('$name, $mode', async ({ body, extra }) => {
    const request = { ...body, ...extra };
    const [real, sim] = await both(request, body.model as string);
    expect(real.status, real.text).toBe(200);
    expect([sim.status, sim.contentType]).toEqual([real.status, real.contentType]);
    if (!('stream' in extra)) {
      expect(signature(sim.json)).toBe(signature(real.json));
      return;
    }
    const [r, s] = [streamShape(real.events), streamShape(sim.events)];
    expect({ order: s.order, usageOn: s.usageOn }).toEqual({ order: r.order, usageOn: r.usageOn });
    // Every kind of event the real server sent here, the simulator sent in the same shape.
    expect([...r.events].filter((e) => !s.events.has(e))).toEqual([]);
    for (const e of r.events) realShapes.add(e);
    for (const e of s.events) simShapes.add(e);
  });

  it('the simulator sends no event of a shape the real server never sent', () => {
    expect(realShapes.size).toBeGreaterThan(0);
    expect([...simShapes].filter((e) => !realShapes.has(e))).toEqual([]);
  });

  it("refusals: Ollama's checks of the body and the model, byte for byte", async () => {
    const turns = (...messages: unknown[]): Body => ({ model: GEMMA, messages });
    const image = (url: string): Body => user([{ type: 'image_url', image_url: { url } }] as unknown as string);
    const refused: (Body | string)[] = [
      '{"model":"gemma4:26b","messages":[{"role":"user"',
      { model: GEMMA, messages: [] },
      { model: GEMMA, messages: 'x' },
      { messages: [user('Hello')] },
      { model: 'nope', messages: [user('Hello')] },
      { model: 'nope', messages: [user('Hello')], stream: true },
      turns({ role: 'user', content: null }),
      turns({
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{x' } }],
      }),
      turns(user([{ type: 'video' }] as unknown as string)),
      turns(image('http://169.254.169.254/latest/meta-data')),
      turns(image('data:image/png;base64,xx')),
      turns(image('data:image/gif;base64,AAAA')),
    ];
    for (const body of refused) {
      const [real, sim] = await both(body, GEMMA);
      expect(real.status, real.text).toBeGreaterThanOrEqual(400);
      expect([sim.status, sim.contentType, sim.text], JSON.stringify(body)).toEqual([
        real.status,
        real.contentType,
        real.text,
      ]);
    }
  });
});
