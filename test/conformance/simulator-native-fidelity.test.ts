/**
 * The simulator (`ob-proxy simulate`) against real Ollama v0.33.0-rc2 on Ollama's own API: the
 * same requests to both, and the same shapes back (test/helpers/wire-shape.ts): the content type,
 * the fields and JSON types of a plain answer and of each kind of stream line (a token, the done
 * line), the done reason, the listings' and the card's fields, and Ollama's refusals byte for
 * byte. Each request is chosen so that the tiny real model does what the simulator's does (cut
 * at num_predict). A difference is the simulator's to fix.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GEMMA } from '../helpers/conformance-cases.js';
import { type SimProcess, startSimulate } from '../helpers/processes.js';
import { REALUP_SKIP, type RealServer, startOllama } from '../helpers/realup.js';
import { signature } from '../helpers/wire-shape.js';

type Json = Record<string, unknown>;

interface Answer {
  status: number;
  type: string | null;
  text: string;
  lines: Json[];
}

async function ask(base: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  const lines = text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Json);
  return { status: res.status, type: res.headers.get('content-type'), text, lines };
}

/** The shapes of a stream's lines, in order, each kind once: `token` lines, then the `done` line. */
function streamShape(lines: Json[]): { order: string[]; shapes: Set<string> } {
  const order: string[] = [];
  const shapes = new Set<string>();
  for (const l of lines) {
    const kind = l.done === true ? 'done' : 'token';
    if (order.at(-1) !== kind) order.push(kind);
    shapes.add(`${kind}\n${signature(l)}`);
  }
  return { order, shapes };
}

const CUT = { temperature: 1, seed: 7, num_predict: 3 };
const CASES: { name: string; path: string; body: Json }[] = [
  {
    name: 'chat',
    path: '/api/chat',
    body: { model: GEMMA, messages: [{ role: 'user', content: 'Hello there friend' }], options: CUT },
  },
  { name: 'generate', path: '/api/generate', body: { model: GEMMA, prompt: 'Once upon a time', options: CUT } },
];
const MODES = [
  { mode: 'plain', stream: false },
  { mode: 'streamed', stream: true },
];

const title =
  REALUP_SKIP === null
    ? "the simulator speaks Ollama's own API as real Ollama does"
    : `the simulator's fidelity on Ollama's own API: skipped, ${REALUP_SKIP}`;

describe.skipIf(REALUP_SKIP !== null)(title, () => {
  let ollama: RealServer;
  let sim: SimProcess;

  beforeAll(async () => {
    [ollama, sim] = await Promise.all([startOllama(), startSimulate([GEMMA])]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([ollama?.stop(), sim?.stop()]);
  });

  const both = async (method: 'GET' | 'POST', path: string, body?: unknown): Promise<[Answer, Answer]> => [
    await ask(ollama.url, method, path, body),
    await ask(sim.url, method, path, body),
  ];

  const cases = CASES.flatMap((c) => MODES.map((m) => ({ ...c, ...m })));
  it.each(cases)('$name, $mode, cut at num_predict', async ({ path, body, stream }) => {
    const [real, fake] = await both('POST', path, { ...body, stream });
    expect(real.status, real.text).toBe(200);
    expect([fake.status, fake.type]).toEqual([real.status, real.type]);
    expect(fake.text.endsWith('\n')).toBe(real.text.endsWith('\n'));
    expect(fake.lines.at(-1)!.done_reason).toBe(real.lines.at(-1)!.done_reason);
    if (!stream) {
      expect(signature(fake.lines[0])).toBe(signature(real.lines[0]));
      return;
    }
    const [r, s] = [streamShape(real.lines), streamShape(fake.lines)];
    expect(s.order).toEqual(r.order);
    expect([...s.shapes].sort()).toEqual([...r.shapes].sort());
  });

  it('a request with nothing to generate: the same model-load answer', async () => {
    for (const [path, body] of [
      ['/api/chat', { model: GEMMA, messages: [] }],
      ['/api/generate', { model: GEMMA }],
    ] as const) {
      const [real, fake] = await both('POST', path, body);
      expect([fake.status, fake.type, signature(fake.lines)]).toEqual([real.status, real.type, signature(real.lines)]);
    }
  });

  it('tags, ps and show: the same fields; version: a version', async () => {
    await both('POST', '/api/generate', { model: GEMMA, prompt: 'x', stream: false, options: CUT });
    for (const path of ['/api/tags', '/api/ps']) {
      const [real, fake] = await both('GET', path);
      expect([fake.status, fake.type, signature(fake.lines)], path).toEqual([
        real.status,
        real.type,
        signature(real.lines),
      ]);
    }
    const [real, fake] = await both('POST', '/api/show', { model: GEMMA });
    const top = (a: Answer) => Object.keys(a.lines[0]!).sort();
    expect(top(fake)).toEqual(top(real));
    expect(signature(fake.lines[0]!.details)).toBe(signature(real.lines[0]!.details));
    const [v, fv] = await both('GET', '/api/version');
    expect(signature(fv.lines)).toBe(signature(v.lines));
  });

  it("refusals: Ollama's checks of the body and the model, byte for byte", async () => {
    const refused: [string, unknown][] = [
      ['/api/chat', {}],
      ['/api/chat', { model: 'nope', messages: [] }],
      ['/api/generate', { model: 'nope', prompt: 'x' }],
      ['/api/chat', { model: GEMMA, messages: [], stream: 'yes' }],
      ['/api/generate', { model: GEMMA, prompt: 'x', stream: 'yes' }],
      ['/api/chat', { model: GEMMA, messages: 'x' }],
      ['/api/chat', { model: GEMMA, messages: [], options: 'x' }],
      ['/api/chat', { model: GEMMA, messages: [{ role: 'user', content: 'x' }], options: { num_predict: 'x' } }],
      ['/api/show', { model: 'nope' }],
    ];
    for (const [path, body] of refused) {
      const [real, fake] = await both('POST', path, body);
      expect(real.status, real.text).toBeGreaterThanOrEqual(400);
      expect([fake.status, fake.type, fake.text], `${path} ${JSON.stringify(body)}`).toEqual([
        real.status,
        real.type,
        real.text,
      ]);
    }
  });
});
