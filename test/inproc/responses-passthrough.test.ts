/**
 * POST /v1/responses through `inject()` (docs/contract.md §6) to a model server that has the
 * route: the client's bytes sent upstream untouched, the answer passed through from the
 * simulator's own /v1/responses, event for event, with only the response id replaced and no
 * [DONE]; the key's usage counted; in flight, a revocation ends the stream with one Responses
 * error event, and a hostile endless answer is bounded. What the simulator received is asserted.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Answer, type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { postResponses, readyInstance, responsesSent as sent } from '../helpers/inproc-responses.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
const keys: Record<string, string> = {};

const post = (key: string | null, body: unknown): Promise<Answer> => postResponses(d, key, body);

beforeAll(async () => {
  d = await buildInproc({ bodyLimit: 64 * 1024, maxFrameBytes: 16 * 1024, maxAnswerBytes: 256 * 1024 });
  ({ sim, url: simUrl } = await startSim({ models: [MODEL, 'qwen3.6:27b'], chunks: 3 }));
  for (const id of ['live', 'mid']) keys[id] = await readyInstance(d, id, simUrl);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

beforeEach(async () => {
  await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
});

describe('passthrough to the model server’s /v1/responses', () => {
  it('a plain response: the client’s bytes go upstream untouched, the answer comes back with only its id replaced', async () => {
    const body = `{"model":"${MODEL}","input":"Say hello","store":false,"unlisted_field":{"kept":true}}`;
    const r = await post(keys.live!, body);
    expect(r.status).toBe(200);
    expect(sent(sim)).toEqual([JSON.parse(body)]);
    const res = r.json as Record<string, unknown>;
    expect(res.id).toMatch(/^resp_[0-9A-Za-z]{24}$/);
    expect(r.text.endsWith('}\n')).toBe(true);
    expect(res.output).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 't0 t1 t2 ', annotations: [], logprobs: [] }],
      },
    ]);
    expect(res.usage).toEqual({
      input_tokens: 2,
      output_tokens: 3,
      total_tokens: 5,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    });
    // The key's usage counts the exchange with the Responses usage's tokens.
    const usage = ((await d.manage('GET', '/v1/keys?instance=live')).json as { usage: Record<string, unknown> }[])[0]!
      .usage;
    expect(usage).toMatchObject({ requests: 1, promptTokens: 2, completionTokens: 3, errors: 0 });
  });

  it('a stream: every event as the model server sent it, the response id ours in each response object, no [DONE]', async () => {
    const r = await post(keys.live!, { model: MODEL, input: 'Say hello', stream: true });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    const events = frames.map((f) => {
      const [ev, data] = f.split('\n');
      return { event: ev!.slice(7), data: JSON.parse(data!.slice(6)) as Record<string, unknown> };
    });
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.data.sequence_number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const ids = events.filter((e) => e.data.response !== undefined).map((e) => (e.data.response as { id: string }).id);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toMatch(/^resp_[0-9A-Za-z]{24}$/);
    // Keys sorted as Ollama's Go maps write them: relayed as they came.
    expect(frames[4]).toMatch(
      /^event: response.output_text.delta\ndata: \{"content_index":0,"delta":"t0 ","item_id":"msg_\d+","logprobs":\[\],"output_index":0,"sequence_number":4,"type":"response.output_text.delta"\}$/,
    );
    expect(r.text).not.toContain('[DONE]');
    expect(sent(sim)).toEqual([{ model: MODEL, input: 'Say hello', stream: true }]);
  });
});
describe('in flight', () => {
  it('a revocation mid-stream ends it at once with one Responses error event, the next sequence number, and the upstream aborted', async () => {
    const pending = post(keys.mid!, {
      model: MODEL,
      input: 'Say hello [[sim tokensPerSecond=20 chunks=200]]',
      stream: true,
    });
    await sim.waitFor((r) => r.path === '/v1/responses' && r.chunksSent >= 4);
    const listed = (await d.manage('GET', '/v1/keys?instance=mid')).json as { id: string }[];
    expect((await d.manage('POST', `/v1/keys/${listed[0]!.id}/revoke`, {})).status).toBe(200);
    const r = await pending;
    const frames = r.text.split('\n\n').filter((f) => f !== '');
    const last = frames[frames.length - 1]!;
    const before = frames
      .slice(0, -1)
      .map((f) => JSON.parse(f.split('\n')[1]!.slice(6)) as { sequence_number: number });
    expect(before.length).toBeGreaterThanOrEqual(4);
    expect(last).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'revoked_api_key',
        message:
          'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
        param: null,
        sequence_number: before[before.length - 1]!.sequence_number + 1,
      })}`,
    );
    expect(r.text.match(/event: error/g)).toHaveLength(1);
    const upstream = await sim.waitFor((q) => q.path === '/v1/responses' && q.endedAt !== null);
    expect(upstream.aborted).toBe(true);
  });

  it('a hostile endless answer is bounded: an endless event ends the stream with one error event, an endless body is 502', async () => {
    const s = await post(keys.live!, { model: MODEL, input: 'x [[sim fail=endless-line]]', stream: true });
    expect(s.status).toBe(200);
    expect(s.text).toBe(
      `event: error\ndata: ${JSON.stringify({
        type: 'error',
        code: 'upstream_error',
        message: 'The model server sent an event larger than 16384 bytes; the stream was ended.',
        param: null,
        sequence_number: 0,
      })}\n\n`,
    );
    const p = await post(keys.live!, { model: MODEL, input: 'x [[sim fail=endless-body]]' });
    expect(p.status).toBe(502);
    expect((p.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'upstream_error',
      message: expect.stringContaining('larger than 262144 bytes'),
    });
    const ended = sent(sim);
    expect(ended).toHaveLength(2);
    await sim.waitFor((q) => q.path === '/v1/responses' && q.endedAt !== null && q.aborted);
  });
});
