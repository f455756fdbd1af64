/**
 * The simulator speaks Ollama's own API as Ollama v0.33 does (sim-native.ts, sim-native-info.ts):
 * `/api/chat` and `/api/generate` streamed as NDJSON by default and plain when told, with
 * `done`, `done_reason` and the counts on the last line; a request with nothing to generate
 * answered as a model load; Go's decoding errors and an unknown model as `{"error":…}`;
 * `num_predict` as the cap; Ollama's error line mid-stream; `/api/embed`, `/api/tags`,
 * `/api/ps` (the models used), `/api/show` and `/api/version` in their shapes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSimulator, type Simulator } from '../../simulator/simulator.js';
import { MODEL, rawRequest } from './helpers.js';

let sim: Simulator;
let base: string;

beforeAll(async () => {
  sim = buildSimulator({ models: [MODEL, 'tiny'], chunks: 3 });
  base = await sim.listen(0);
});

afterAll(async () => {
  await sim?.close();
});

const post = (path: string, body: unknown) =>
  rawRequest(base, { method: 'POST', path, body: typeof body === 'string' ? body : JSON.stringify(body) });

const CREATED = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
const COUNTS = {
  total_duration: expect.any(Number),
  load_duration: expect.any(Number),
  prompt_eval_count: 2,
  prompt_eval_duration: expect.any(Number),
  eval_count: 3,
  eval_duration: expect.any(Number),
};

describe('POST /api/chat and /api/generate', () => {
  it('streams NDJSON by default: a line a token, then the done line with the reason and the counts', async () => {
    const r = await post('/api/chat', { model: MODEL, messages: [{ role: 'user', content: 'Say hi' }] });
    expect([r.status, r.headers['content-type']]).toEqual([200, 'application/x-ndjson']);
    const text = r.body.toString('utf8');
    expect(text.endsWith('}\n')).toBe(true);
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as unknown);
    expect(lines).toEqual([
      ...['t0 ', 't1 ', 't2 '].map((content) => ({
        model: MODEL,
        created_at: CREATED,
        message: { role: 'assistant', content },
        done: false,
      })),
      {
        model: MODEL,
        created_at: CREATED,
        message: { role: 'assistant', content: '' },
        done: true,
        done_reason: 'stop',
        ...COUNTS,
      },
    ]);
  });

  it('plain when told: one object, no trailing newline, `response` for generate; num_predict cuts it with `length`', async () => {
    const r = await post('/api/generate', {
      model: MODEL,
      prompt: 'Say hi',
      stream: false,
      options: { num_predict: 2 },
    });
    expect([r.status, r.headers['content-type']]).toEqual([200, 'application/json; charset=utf-8']);
    expect(r.body.toString('utf8').endsWith('}')).toBe(true);
    expect(JSON.parse(r.body.toString('utf8'))).toEqual({
      model: MODEL,
      created_at: CREATED,
      response: 't0 t1 ',
      done: true,
      done_reason: 'length',
      context: [100, 101, 102, 103],
      ...COUNTS,
      eval_count: 2,
    });
  });

  it('nothing to generate: the model is loaded, one bare object whatever `stream` says', async () => {
    const r = await post('/api/chat', { model: MODEL, messages: [] });
    expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(r.body.toString('utf8'))).toEqual({
      model: MODEL,
      created_at: CREATED,
      message: { role: 'assistant', content: '' },
      done: true,
      done_reason: 'load',
    });
  });

  it('refuses as Ollama does, in its shape', async () => {
    const cases: [string, unknown, number, string][] = [
      ['/api/chat', '{bad', 400, 'invalid character'],
      ['/api/chat', {}, 400, 'model is required'],
      ['/api/chat', { model: 'nope', messages: [] }, 404, "model 'nope' not found"],
      ['/api/generate', { model: 'nope', prompt: 'x' }, 404, "model 'nope' not found"],
      [
        '/api/chat',
        { model: MODEL, stream: 'yes' },
        400,
        'json: cannot unmarshal string into Go struct field ChatRequest.stream of type bool',
      ],
      [
        '/api/chat',
        { model: MODEL, options: 'x' },
        400,
        'json: cannot unmarshal string into Go struct field ChatRequest.options of type map[string]interface {}',
      ],
      [
        '/api/chat',
        { model: MODEL, messages: [{ role: 'user', content: 'x' }], options: { num_predict: 'x' } },
        500,
        'option "num_predict" must be of type integer',
      ],
    ];
    for (const [path, body, status, message] of cases) {
      const r = await post(path, body);
      const json = JSON.parse(r.body.toString('utf8')) as { error: string };
      expect({ status: r.status, keys: Object.keys(json), error: json.error.slice(0, message.length) }).toEqual({
        status,
        keys: ['error'],
        error: message,
      });
    }
  });

  it('fail=error-event: Ollama’s error line after failAfterChunks tokens, and no done line', async () => {
    const r = await post('/api/chat', {
      model: MODEL,
      messages: [{ role: 'user', content: 'x [[sim fail=error-event failAfterChunks=2]]' }],
    });
    const lines = r.body.toString('utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[2]!)).toEqual({ error: expect.stringContaining('model runner has unexpectedly stopped') });
  });
});

describe('POST /api/embed, GET /api/tags, /api/ps, /api/version, POST /api/show', () => {
  it('embeds each input, the same input the same vector, usage as prompt_eval_count', async () => {
    const r = await post('/api/embed', { model: MODEL, input: ['a b', 'c', 'a b'] });
    const json = JSON.parse(r.body.toString('utf8')) as { embeddings: number[][] };
    expect(Object.keys(json)).toEqual(['model', 'embeddings', 'total_duration', 'load_duration', 'prompt_eval_count']);
    expect(json).toMatchObject({ model: MODEL, prompt_eval_count: 5 });
    expect(json.embeddings).toHaveLength(3);
    expect(json.embeddings[0]).toEqual(json.embeddings[2]);
  });

  it('lists every model in tags (an untagged one as :latest), and in ps those used', async () => {
    const tags = JSON.parse((await rawRequest(base, { path: '/api/tags' })).body.toString('utf8')) as {
      models: Record<string, unknown>[];
    };
    expect(tags.models.map((m) => m.name)).toEqual([MODEL, 'tiny:latest']);
    expect(Object.keys(tags.models[0]!)).toEqual([
      'name',
      'model',
      'modified_at',
      'size',
      'digest',
      'details',
      'capabilities',
    ]);
    await post('/api/generate', { model: 'tiny', prompt: 'x', stream: false });
    const ps = JSON.parse((await rawRequest(base, { path: '/api/ps' })).body.toString('utf8')) as {
      models: Record<string, unknown>[];
    };
    expect(ps.models.map((m) => m.name)).toContain('tiny:latest');
    expect(Object.keys(ps.models[0]!)).toEqual([
      'name',
      'model',
      'size',
      'digest',
      'details',
      'expires_at',
      'size_vram',
      'context_length',
    ]);
  });

  it('shows a model it has (by `model` or `name`), and 404s another naming its tag', async () => {
    const card = JSON.parse((await post('/api/show', { name: MODEL })).body.toString('utf8')) as Record<
      string,
      unknown
    >;
    expect(Object.keys(card)).toEqual([
      'modelfile',
      'template',
      'details',
      'model_info',
      'tensors',
      'capabilities',
      'modified_at',
    ]);
    const r = await post('/api/show', { model: 'nope' });
    expect([r.status, r.body.toString('utf8')]).toEqual([404, '{"error":"model \'nope:latest\' not found"}']);
    expect(JSON.parse((await rawRequest(base, { path: '/api/version' })).body.toString('utf8'))).toEqual({
      version: '0.33.0-sim',
    });
  });
});
