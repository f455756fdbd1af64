/**
 * The openai SDK's own WebSocket client for the Responses API (`ResponsesWS`, on `ws`) against
 * the gateway, in front of a simulator that has no WebSocket: two turns on one socket, the second
 * continuing the first by `previous_response_id`, and a refusal reaching the SDK's error handler
 * with our code and message.
 */
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance, responsesSent } from '../helpers/inproc-responses.js';

let d: Inproc;
let sim: Simulator;
let key: string;

beforeAll(async () => {
  d = await buildInproc();
  await d.daemon.listen();
  let url: string;
  ({ sim, url } = await startSim());
  key = await readyInstance(d, 'gpu-1', url);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

interface Completed {
  response: {
    id: string;
    output_text?: string;
    output: { content?: { text: string }[] }[];
    previous_response_id: string | null;
  };
}

/** The next response.completed the SDK emits, or the error it reports first. */
function completed(ws: ResponsesWS): Promise<Completed> {
  return new Promise((resolve, reject) => {
    const done = (e: Completed): void => {
      ws.off('error', failed);
      resolve(e);
    };
    const failed = (err: unknown): void => {
      ws.off('response.completed', done as never);
      reject(err as Error);
    };
    ws.once('response.completed', done as never);
    ws.once('error', failed);
  });
}

it('two turns on one socket, the second continuing the first', async () => {
  const client = new OpenAI({ baseURL: `${d.daemon.ctx.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
  const ws = new ResponsesWS(client);
  const before = responsesSent(sim).length;
  const first = completed(ws);
  ws.send({ type: 'response.create', model: MODEL, store: false, input: 'Remember 7 [[sim chunks=2]]' });
  const r1 = (await first).response;
  expect(r1.id).toMatch(/^resp_\w{24}$/);
  const second = completed(ws);
  ws.send({
    type: 'response.create',
    model: MODEL,
    store: false,
    previous_response_id: r1.id,
    input: 'Which? [[sim chunks=1]]',
  });
  const r2 = (await second).response;
  expect(r2.previous_response_id).toBe(r1.id);
  const sent = responsesSent(sim).slice(before) as { input: unknown }[];
  expect(sent).toHaveLength(2);
  expect(sent[1]!.input).toEqual([
    { type: 'message', role: 'user', content: 'Remember 7 [[sim chunks=2]]' },
    ...(r1.output as unknown[]),
    { type: 'message', role: 'user', content: 'Which? [[sim chunks=1]]' },
  ]);
  ws.close();
});

it("a response the socket does not keep reaches the SDK's error handler, with our code and message", async () => {
  const client = new OpenAI({ baseURL: `${d.daemon.ctx.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
  const ws = new ResponsesWS(client);
  const failure = completed(ws).then(
    () => null,
    (err: unknown) => err as { message: string; error: { status: number; error: { code: string } } },
  );
  ws.send({ type: 'response.create', model: MODEL, previous_response_id: 'resp_elsewhere', input: 'x' });
  const err = await failure;
  expect(err?.message).toMatch(/^Previous response with id "resp_elsewhere" not found\./);
  expect(err?.error).toMatchObject({ type: 'error', status: 400, error: { code: 'previous_response_not_found' } });
  ws.close();
});
