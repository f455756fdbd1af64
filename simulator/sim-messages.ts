/**
 * `POST /v1/messages`, Anthropic's Messages API, as Ollama (≥ 0.14) serves it (its
 * anthropic/anthropic.go and middleware/anthropic.go): Go's decoding of MessagesRequest, then
 * `model is required`, `max_tokens is required and must be positive`, `messages is required`
 * (400, gin's JSON: no trailing newline), an unknown model 404; errors in Anthropic's envelope
 * with a `request_id`. A plain answer is a `message` with the encoder's trailing newline; a
 * stream is `event: <type>` + `data: <json>` frames, keys in the structs' order: `message_start`
 * (its usage an estimate of the input), per block `content_block_start`, deltas
 * (`thinking_delta`, `text_delta`, one `input_json_delta` with a tool's whole input),
 * `content_block_stop`, then `message_delta` with the stop reason and the usage, and
 * `message_stop`. No `ping`. The agent answers as the chat route's does: a `tool_use` of the
 * first tool when the last turn is the user's, a final text naming the tool after its
 * `tool_result`.
 */
import { randomBytes } from 'node:crypto';
import { sendJson } from './sim-chat.js';
import { type ChatEnv, type Job, type ParsedBody, type SimChatRequest } from './sim-job.js';
import { resolveKnobs } from './sim-directives.js';
import { HOSTILE_MODES, hostile } from './sim-hostile.js';
import { later, writeFrames } from './sim-pacing.js';
import { countPromptTokens, runnerErrorMessage, tokenText } from './sim-responses.js';

type Json = Record<string, unknown>;

const JSON_CT = 'application/json';
const GIN_JSON_CT = 'application/json; charset=utf-8';
const SSE_HEADERS = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' };

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

function errorType(status: number): string {
  if (status === 400) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  return 'api_error';
}

/** Ollama's Anthropic error envelope (anthropic.NewError), with a `req_` id. */
export function anthropicError(status: number, message: string): string {
  return JSON.stringify({
    type: 'error',
    error: { type: errorType(status), message },
    request_id: `req_${hex(12)}`,
  });
}

/** A middleware refusal: gin's c.AbortWithStatusJSON (no trailing newline, `<>&` escaped). */
function refuse(job: Job, message: string): void {
  const body = anthropicError(400, message).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
  sendJson(job.res, 400, body, GIN_JSON_CT);
}

function goType(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  if (isObject(v)) return 'object';
  return typeof v;
}

const TYPED: [string, string, (v: unknown) => boolean][] = [
  ['model', 'string', (v) => typeof v === 'string'],
  ['max_tokens', 'int', (v) => typeof v === 'number' && Number.isInteger(v)],
  ['messages', '[]anthropic.MessageParam', Array.isArray],
  ['stream', 'bool', (v) => typeof v === 'boolean'],
  ['temperature', 'float64', (v) => typeof v === 'number'],
  ['top_p', 'float64', (v) => typeof v === 'number'],
  ['top_k', 'int', (v) => typeof v === 'number' && Number.isInteger(v)],
  ['stop_sequences', '[]string', (v) => Array.isArray(v) && v.every((s) => typeof s === 'string')],
  ['tools', '[]anthropic.Tool', Array.isArray],
  ['tool_choice', 'anthropic.ToolChoice', isObject],
  ['thinking', 'anthropic.ThinkingConfig', isObject],
  ['metadata', 'anthropic.Metadata', isObject],
];

/** The text of a message's content (a string, or its text and tool_result blocks). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let s = '';
  for (const b of content) {
    if (!isObject(b)) continue;
    if (typeof b.text === 'string') s += b.text;
    else if (b.type === 'tool_result') s += textOf(b.content);
  }
  return s;
}

interface Block {
  type: 'thinking' | 'text' | 'tool_use';
  /** Thinking or text, token by token. */
  pieces: string[];
  id?: string;
  name?: string;
  input?: Json;
}

function planOf(body: Json, messages: Json[], tokens: number, think: boolean): Block[] {
  const blocks: Block[] = [];
  if (think) blocks.push({ type: 'thinking', pieces: ['Let me ', 'think.'] });
  const last = messages[messages.length - 1];
  const results = Array.isArray(last?.content)
    ? last.content.filter((b): b is Json => isObject(b) && b.type === 'tool_result')
    : [];
  if (results.length > 0) {
    const result = results[0] as Json;
    let name = 'the tool';
    for (const m of messages)
      if (Array.isArray(m.content))
        for (const b of m.content)
          if (isObject(b) && b.type === 'tool_use' && b.id === result.tool_use_id && typeof b.name === 'string')
            name = b.name;
    blocks.push({ type: 'text', pieces: `Final answer from ${name}: ${textOf(result.content)}`.split(/(?<= )/) });
    return blocks;
  }
  const tools = Array.isArray(body.tools)
    ? body.tools.filter((t): t is Json => isObject(t) && typeof t.name === 'string')
    : [];
  const choice = isObject(body.tool_choice) ? body.tool_choice.type : undefined;
  if (tools.length > 0 && choice !== 'none') {
    const tool = tools[0] as Json;
    const schema = tool.input_schema;
    const props = isObject(schema) && isObject(schema.properties) ? schema.properties : {};
    const input: Json = {};
    for (const key of Object.keys(props)) input[key] = 'Zürich';
    blocks.push({ type: 'tool_use', pieces: [], id: `call_${hex(4)}`, name: tool.name as string, input });
    return blocks;
  }
  blocks.push({ type: 'text', pieces: Array.from({ length: tokens }, (_, i) => tokenText(i)) });
  return blocks;
}

function outputTokens(blocks: Block[]): number {
  return blocks.reduce((n, b) => n + (b.type === 'tool_use' ? 8 : b.pieces.length), 0);
}

/** A block as the answer holds it, fields in ContentBlock's order. */
function wholeBlock(b: Block): Json {
  if (b.type === 'tool_use') return { type: 'tool_use', id: b.id, name: b.name, input: b.input };
  if (b.type === 'thinking') return { type: 'thinking', thinking: b.pieces.join('') };
  return { type: 'text', text: b.pieces.join('') };
}

function frame(event: string, data: Json): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function streamFrames(
  id: string,
  model: string,
  blocks: Block[],
  estimate: number,
  usage: Json,
  stop: string,
): string[] {
  const out: string[] = [];
  out.push(
    frame('message_start', {
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        usage: { input_tokens: estimate, output_tokens: 0 },
      },
    }),
  );
  blocks.forEach((b, index) => {
    const start =
      b.type === 'tool_use'
        ? { type: 'tool_use', id: b.id, name: b.name, input: {} }
        : b.type === 'thinking'
          ? { type: 'thinking', thinking: '' }
          : { type: 'text', text: '' };
    out.push(frame('content_block_start', { type: 'content_block_start', index, content_block: start }));
    if (b.type === 'tool_use')
      out.push(
        frame('content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) },
        }),
      );
    for (const p of b.pieces)
      out.push(
        frame('content_block_delta', {
          type: 'content_block_delta',
          index,
          delta: b.type === 'thinking' ? { type: 'thinking_delta', thinking: p } : { type: 'text_delta', text: p },
        }),
      );
    out.push(frame('content_block_stop', { type: 'content_block_stop', index }));
  });
  out.push(frame('message_delta', { type: 'message_delta', delta: { stop_reason: stop }, usage }));
  out.push(frame('message_stop', { type: 'message_stop' }));
  return out;
}

/** Answers one Messages request whose body has been read and recorded. */
export function handleMessages(job: Job, parsed: ParsedBody, env: ChatEnv): void {
  if (!parsed.ok) {
    refuse(job, parsed.message);
    return;
  }
  const body = parsed.value;
  if (!isObject(body)) {
    refuse(job, `json: cannot unmarshal ${goType(body)} into Go value of type anthropic.MessagesRequest`);
    return;
  }
  for (const [field, type, ok] of TYPED) {
    const v = body[field];
    if (v === undefined || v === null || ok(v)) continue;
    refuse(job, `json: cannot unmarshal ${goType(v)} into Go struct field MessagesRequest.${field} of type ${type}`);
    return;
  }
  const model = typeof body.model === 'string' ? body.model : '';
  if (model === '') return refuse(job, 'model is required');
  if (typeof body.max_tokens !== 'number' || body.max_tokens <= 0)
    return refuse(job, 'max_tokens is required and must be positive');
  const messages = (Array.isArray(body.messages) ? body.messages : []).filter(isObject);
  if (messages.length === 0) return refuse(job, 'messages is required');
  for (const m of messages)
    if (Array.isArray(m.content))
      for (const b of m.content)
        if (isObject(b) && b.type === 'tool_use') {
          if (typeof b.id !== 'string' || b.id === '') return refuse(job, "tool_use block missing required 'id' field");
          if (typeof b.name !== 'string' || b.name === '')
            return refuse(job, "tool_use block missing required 'name' field");
        }
  if (!env.hasModel(model)) {
    sendJson(job.res, 404, `${anthropicError(404, `model '${model}' not found`)}\n`);
    return;
  }
  const k = resolveKnobs(env.knobs(), messages);
  const stream = body.stream === true;
  const maxTokens = body.max_tokens;
  if (k.fail === 'hang' || (k.fail === 'hang-mid-stream' && !stream)) return;
  if (k.fail === 'http-error') {
    sendJson(job.res, k.errorStatus, `${anthropicError(k.errorStatus, runnerErrorMessage(k.errorStatus))}\n`);
    return;
  }
  if (HOSTILE_MODES.has(k.fail)) {
    const req: SimChatRequest = { model, body, messages, stream, includeUsage: false, maxTokens };
    hostile(job, req, k, () => env.changed(job.record));
    return;
  }
  const thinking = isObject(body.thinking) ? body.thinking.type : undefined;
  const think = env.agent().reasoning && thinking !== 'disabled';
  const blocks = planOf(body, messages, Math.min(maxTokens, k.chunks), think);
  const chatLike = messages.map((m) => ({ content: textOf(m.content) }));
  if (typeof body.system === 'string') chatLike.push({ content: body.system });
  const input = countPromptTokens(chatLike);
  const output = outputTokens(blocks);
  const hasTool = blocks.some((b) => b.type === 'tool_use');
  const stop = hasTool ? 'tool_use' : maxTokens < k.chunks ? 'max_tokens' : 'end_turn';
  const id = `msg_${hex(12)}`;
  const usage = { input_tokens: input, output_tokens: output };
  if (!stream) {
    const answer = {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: blocks.map(wholeBlock),
      stop_reason: stop,
      usage,
    };
    later(job, k.firstTokenDelayMs, () => sendJson(job.res, 200, `${JSON.stringify(answer)}\n`, JSON_CT));
    return;
  }
  // Ollama's estimate of the input before generation: a quarter of the text's length.
  let chars = 0;
  for (const m of chatLike) chars += m.content.length;
  const estimate = Math.max(1, Math.floor(chars / 4));
  const frames = streamFrames(id, model, blocks, estimate, usage, stop);
  later(job, k.firstTokenDelayMs, () => writeFrames(job, frames, k, env, SSE_HEADERS));
}
