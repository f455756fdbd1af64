/**
 * A gate, not an authority (docs/contract.md §3b): bodies the coding agents send, which the model
 * server accepts, reach it byte for byte on every route, however a stricter reading of the API
 * would judge their roles, items, blocks and fields. The gate refuses only what the key's promise
 * reads (model, caps, stream flag, the multiplied work), naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { readyInstance } from '../helpers/inproc-responses.js';

let d: Inproc;
let sim: Simulator;
let key: string;

beforeAll(async () => {
  d = await buildInproc();
  let url: string;
  ({ sim, url } = await startSim({ models: [MODEL] }));
  key = await readyInstance(d, 'gpu', url);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

async function send(url: string, text: string, headers: Record<string, string> = {}) {
  const before = sim.requests.length;
  const r = await d.daemon.dataPlane.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    payload: text,
  });
  return {
    status: r.statusCode,
    json: JSON.parse(r.body) as Record<string, unknown>,
    sent: sim.requests.slice(before),
  };
}

describe('bodies the agents send reach the model server as written', () => {
  it('Claude Code: a system turn inside messages, thinking, context_management, output_config, ?beta=true', async () => {
    const body = {
      model: MODEL,
      max_tokens: 32000,
      system: [{ type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'say hi' }] },
        { role: 'system', content: 'The user is in /work.' },
      ],
      thinking: { type: 'enabled', budget_tokens: 31999 },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      output_config: { effort: 'medium' },
      metadata: { user_id: 'user_0_account__session_1' },
      stream: false,
    };
    const text = JSON.stringify(body);
    const r = await send('/v1/messages?beta=true', text, { 'anthropic-beta': 'context-management-2025-06-27' });
    expect(r.status).toBe(200);
    expect(r.json.type).toBe('message');
    expect(r.sent.map((q) => [q.path, q.body])).toEqual([['/v1/messages', body]]);
  });

  it('Qwen Code: a thinking budget equal to max_tokens', async () => {
    const body = {
      model: MODEL,
      max_tokens: 32000,
      thinking: { type: 'enabled', budget_tokens: 32000 },
      messages: [{ role: 'user', content: 'hi' }],
    };
    const r = await send('/v1/messages', JSON.stringify(body));
    expect(r.status).toBe(200);
    expect(r.sent.map((q) => q.body)).toEqual([body]);
  });

  it('Codex: a function_call_output with a name and a namespace and no call_id', async () => {
    const body = {
      model: MODEL,
      store: false,
      include: ['reasoning.encrypted_content'],
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'list files' }] },
        { type: 'function_call', call_id: 'call_1', name: 'exec_command', arguments: '{"cmd":"ls"}' },
        { type: 'function_call_output', name: 'exec_command', namespace: 'functions', output: 'README.md' },
      ],
      tools: [
        { type: 'function', name: 'exec_command', parameters: { type: 'object', properties: {} }, strict: false },
        { type: 'web_search', external_web_access: false },
        { type: 'namespace', name: 'mcp', tools: [] },
      ],
      tool_choice: 'auto',
      parallel_tool_calls: false,
      reasoning: null,
      stream: false,
    };
    const r = await send('/v1/responses', JSON.stringify(body));
    expect(r.status).toBe(200);
    expect(r.sent.map((q) => [q.path, q.body])).toEqual([['/v1/responses', body]]);
  });

  it('chat: roles, parts and fields another server would refuse are its to refuse', async () => {
    const body = {
      model: MODEL,
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }] },
        { role: 'user', content: 'hi', name: 'has space' },
      ],
      tools: [{ type: 'function', function: { name: 'a.b/c', parameters: { type: 'object' } } }],
      metadata: { count: 3 },
      stop: ['a', 'b', 'c', 'd', 'e'],
    };
    const r = await send('/v1/chat/completions', JSON.stringify(body));
    expect(r.status).toBe(200);
    expect(r.sent.map((q) => q.body)).toEqual([body]);
  });
});

describe('what the key’s promise reads is still refused, naming the field', () => {
  it.each([
    ['/v1/messages', { model: MODEL, max_tokens: 0, messages: [] }, 'max_tokens'],
    ['/v1/messages', { model: MODEL, max_tokens: 8, messages: 'hi' }, 'messages'],
    ['/v1/responses', { model: MODEL, input: 'x', max_output_tokens: -1 }, 'max_output_tokens'],
    ['/v1/completions', { model: MODEL, prompt: ['a', 'b'] }, 'prompt'],
    ['/v1/completions', { model: MODEL, prompt: [[1, 2], [3]] }, 'prompt'],
    ['/v1/completions', { model: MODEL, prompt: 'a', best_of: 3 }, 'best_of'],
    ['/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'x' }], n: 4 }, 'n'],
  ])('%s %j: 400 at %s, nothing sent', async (url, body, param) => {
    const r = await send(url, JSON.stringify(body));
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.json)).toContain(`"${param}`);
    expect(r.sent).toEqual([]);
  });

  it('one prompt given as a list goes as written', async () => {
    for (const prompt of [['only one'], [1, 2, 3], [[1, 2, 3]]]) {
      const body = { model: MODEL, prompt, max_tokens: 4 };
      const r = await send('/v1/completions', JSON.stringify(body));
      expect(r.sent.map((q) => q.body)).toEqual([body]);
    }
  });
});
