/**
 * POST /v1/responses through `inject()` (docs/contract.md §6), refused before anything is sent:
 * the same request path as chat, so the key's checks, their order and the JSON-key rule hold, and
 * the body is checked as OpenAI documents it, the refusal naming the field. The simulator, the
 * model server, received nothing in each case.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Answer, type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { postResponses, readyInstance, responsesSent as sent } from '../helpers/inproc-responses.js';
import { refusal as err } from '../helpers/status-and-json.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
const keys: Record<string, string> = {};

const post = (key: string | null, body: unknown): Promise<Answer> => postResponses(d, key, body);

beforeAll(async () => {
  d = await buildInproc({ bodyLimit: 64 * 1024, maxFrameBytes: 16 * 1024, maxAnswerBytes: 256 * 1024 });
  ({ sim, url: simUrl } = await startSim({ models: [MODEL, 'qwen3.6:27b'], chunks: 3 }));
  for (const id of ['live', 'revoked', 'removed']) keys[id] = await readyInstance(d, id, simUrl);
  keys.other = await readyInstance(d, 'other', simUrl, 'qwen3.6:27b');
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  await d.manage('DELETE', '/v1/instances/removed');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

beforeEach(async () => {
  await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
});

describe('the key is checked as on chat, in the same order, and a refusal sends nothing', () => {
  it('no key, an unknown key, a revoked key, a removed deployment, another instance’s model', async () => {
    const body = { model: MODEL, input: 'Say hello' };
    const cases: [string | null, unknown][] = [
      [
        null,
        err(
          400,
          'invalid_request_error',
          'missing_api_key',
          'No API key: send the header "Authorization: Bearer ob_sk_…" (SDKs: set apiKey).',
        ),
      ],
      [
        'ob_sk_nope',
        err(
          401,
          'authentication_error',
          'invalid_api_key',
          'The API key is not valid. Check that it was copied whole; if it was, ask whoever gave you the key for a new one.',
        ),
      ],
      [
        keys.revoked!,
        err(
          401,
          'authentication_error',
          'revoked_api_key',
          'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
        ),
      ],
      [
        keys.removed!,
        err(
          404,
          'not_found_error',
          'deployment_not_found',
          'No deployment exists for this API key any more. Ask whoever gave you the key for a key of a running instance.',
        ),
      ],
      [
        keys.other!,
        err(
          400,
          'invalid_request_error',
          'model_mismatch',
          'This API key is bound to a deployment of "qwen3.6:27b"; the request asked for "gemma4:26b". Set model to "qwen3.6:27b".',
          'model',
        ),
      ],
    ];
    for (const [key, expected] of cases) {
      const r = await post(key, body);
      expect({ status: r.status, json: r.json }).toEqual(expected);
    }
    expect(sent(sim)).toEqual([]);
  });

  it('a revoked key wins over a bad body; a bad body wins over the model', async () => {
    expect((await post(keys.revoked!, '{not json')).status).toBe(401);
    const r = await post(keys.other!, { model: MODEL, input: 5 });
    expect(r.json).toEqual({
      error: {
        message: 'input must be a string or an array of items.',
        type: 'invalid_request_error',
        code: 'invalid_request',
        param: 'input',
      },
    });
    expect(sent(sim)).toEqual([]);
  });

  it('duplicate keys, and case variants of the fields the gate reads, are refused', async () => {
    const cases: [string, string | null, string][] = [
      [
        `{"model":"${MODEL}","input":"a","model":"qwen3.6:27b"}`,
        null,
        'The request body repeats a key inside one object. Send each key once: decoders disagree on which copy counts.',
      ],
      [
        `{"model":"${MODEL}","input":"a","MODEL":"qwen3.6:27b"}`,
        'MODEL',
        '"MODEL" differs from the field "model" only by case. Send the field as "model".',
      ],
      [
        `{"model":"${MODEL}","input":"a","Previous_Response_Id":"resp_1"}`,
        'Previous_Response_Id',
        '"Previous_Response_Id" differs from the field "previous_response_id" only by case. Send the field as "previous_response_id".',
      ],
    ];
    for (const [body, param, message] of cases) {
      const r = await post(keys.live!, body);
      expect({ status: r.status, json: r.json }).toEqual(
        err(400, 'invalid_request_error', 'invalid_json', message, param),
      );
    }
    expect(sent(sim)).toEqual([]);
  });

  it('previous_response_id and conversation: 400 unsupported_parameter, telling the client to send the whole conversation', async () => {
    for (const field of ['previous_response_id', 'conversation']) {
      const r = await post(keys.live!, { model: MODEL, input: 'next', [field]: 'resp_abc' });
      expect({ status: r.status, json: r.json }).toEqual(
        err(
          400,
          'invalid_request_error',
          'unsupported_parameter',
          `${field} is not supported: this deployment keeps no responses or conversations. Send the whole conversation in \`input\` (with store: false, SDKs send every item)${field === 'previous_response_id' ? ', or continue over a Responses WebSocket, which keeps its last response' : ''}.`,
          field,
        ),
      );
    }
    expect(sent(sim)).toEqual([]);
  });

  it('the fields the gate reads are refused when they cannot be read, naming the field', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [
        { input: 'a', max_output_tokens: 0 },
        'max_output_tokens',
        'max_output_tokens must be an integer from 1 to 9007199254740991.',
      ],
      [{ input: 'a', stream: 'yes' }, 'stream', 'stream must be true or false.'],
      [{ input: 'a', model: 7 }, 'model', 'model must be a non-empty string.'],
    ];
    for (const [extra, param, message] of cases) {
      const r = await post(keys.live!, { model: MODEL, ...extra });
      expect({ status: r.status, json: r.json }).toEqual(
        err(400, 'invalid_request_error', 'invalid_request', message, param),
      );
    }
    expect(sent(sim)).toEqual([]);
  });
});

describe('a gate, not an authority: what the model server judges reaches it as written', () => {
  it('roles, item shapes, tools, tool_choice, metadata and sampling fields go upstream untouched', async () => {
    const bodies: Record<string, unknown>[] = [
      { model: MODEL, input: 'a', temperature: 3 },
      { model: MODEL, input: [{ role: 'robot', content: 'a' }] },
      { model: MODEL, input: 'a', tools: [{ type: 'function' }], tool_choice: 'sometimes' },
      { model: MODEL, input: 'a', metadata: { a: 1 } },
      // Codex writes tool outputs with a name and a namespace and no call_id.
      {
        model: MODEL,
        input: [
          { role: 'user', content: 'run it' },
          { type: 'function_call_output', name: 'exec', namespace: 'shell', output: 'ok' },
        ],
      },
    ];
    for (const body of bodies) {
      await fetch(`${simUrl}/_sim/requests`, { method: 'DELETE' });
      const text = JSON.stringify(body);
      await post(keys.live!, text);
      expect(sent(sim)).toEqual([body]);
    }
  });
});
