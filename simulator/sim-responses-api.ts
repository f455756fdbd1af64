/**
 * `POST /v1/responses` as Ollama (≥ 0.13.3) serves it (its `openai/responses.go`): stateless (no
 * `previous_response_id`, no stored responses), Go's decoding, a plain answer with one trailing
 * newline, and a stream of `event: <type>` + `data: <json>` frames whose data keys come out
 * sorted (Go maps), `sequence_number` from 0, and no `data: [DONE]`. Ollama answers it with the
 * model behind its chat route, so the answers are the chat route's agent's: the first function
 * tool called with arguments sampled from its schema when the last input item is the user's, and
 * "Final answer from the tool: <output>" when it is a `function_call_output`.
 */
import { sampleOf } from './sim-agent.js';
import { resolveKnobs } from './sim-directives.js';
import { HOSTILE_MODES, hostile } from './sim-hostile.js';
import { sendJson } from './sim-chat.js';
import { type ChatEnv, type Job, type ParsedBody, type SimChatRequest } from './sim-job.js';
import { countPromptTokens, errorBody, nowSeconds, runnerErrorMessage, tokenText } from './sim-responses.js';
import type { Knobs } from './sim-types.js';

type Json = Record<string, unknown>;

const JSON_CT = 'application/json';
const SSE_HEADERS = { 'Content-Type': 'text/event-stream' };

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

let seq = 0;
/** Ollama's ids: a prefix and a random number (they may collide; the proxy replaces the response's). */
function itemId(prefix: string): string {
  seq = (seq + 1) % 1_000_000;
  return `${prefix}_${String((seq * 7919) % 1_000_000).padStart(6, '0')}`;
}

/** Keys sorted, at every level, as Go's encoder writes a map[string]any. */
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .sort()
      .filter((k) => v[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${sortedJson(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** The input as chat-like messages: for the prompt count and the `[[sim …]]` directive of the last one. */
function asMessages(input: unknown, instructions: unknown): Json[] {
  const out: Json[] = [];
  if (typeof instructions === 'string') out.push({ role: 'system', content: instructions });
  if (typeof input === 'string') out.push({ role: 'user', content: input });
  else if (Array.isArray(input))
    for (const item of input) {
      if (!isObject(item)) continue;
      if (item.type === 'function_call_output')
        out.push({
          role: 'tool',
          content: typeof item.output === 'string' ? item.output : JSON.stringify(item.output),
        });
      else if (item.type === 'function_call') out.push({ role: 'assistant', content: '' });
      else {
        const c = item.content;
        const text = Array.isArray(c)
          ? c.map((p) => (isObject(p) && typeof p.text === 'string' ? { text: p.text } : {}))
          : c;
        out.push({ role: typeof item.role === 'string' ? item.role : 'user', content: text });
      }
    }
  return out;
}

interface Plan {
  text: string[];
  call: { callId: string; name: string; arguments: string } | null;
}

function planOf(body: Json, k: Readonly<Knobs>, maxTokens: number | null): Plan {
  const input = Array.isArray(body.input) ? body.input : [];
  const last: unknown = input[input.length - 1];
  const tools = Array.isArray(body.tools)
    ? body.tools.filter((t): t is Json => isObject(t) && t.type === 'function' && typeof t.name === 'string')
    : [];
  if (isObject(last) && last.type === 'function_call_output') {
    const out = typeof last.output === 'string' ? last.output : JSON.stringify(last.output);
    return { text: `Final answer from the tool: ${out}`.split(/(?<= )/), call: null };
  }
  if (tools.length > 0 && body.tool_choice !== 'none') {
    const tool = tools[0] as Json;
    const args = JSON.stringify(sampleOf(tool.parameters));
    return { text: [], call: { callId: itemId('call'), name: String(tool.name), arguments: args } };
  }
  const n = maxTokens !== null ? Math.min(maxTokens, k.chunks) : k.chunks;
  return { text: Array.from({ length: n }, (_, i) => tokenText(i)), call: null };
}

interface Reply {
  id: string;
  createdAt: number;
  model: string;
  body: Json;
  prompt: number;
  plan: Plan;
  msgId: string;
  fcId: string;
}

function outputText(text: string): Json {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

function messageItem(r: Reply, status: string, text: string | null): Json {
  return {
    id: r.msgId,
    type: 'message',
    status,
    role: 'assistant',
    content: text === null ? [] : [outputText(text)],
  };
}

function callItem(r: Reply, status: string, args: string): Json {
  const c = r.plan.call as NonNullable<Plan['call']>;
  return { id: r.fcId, type: 'function_call', status, call_id: c.callId, name: c.name, arguments: args };
}

/** The response object, fields in the order of Ollama's struct. */
function responseObject(r: Reply, status: string, output: Json[], usage: boolean): Json {
  const completion = r.plan.text.length + (r.plan.call === null ? 0 : 8);
  const b = r.body;
  return {
    id: r.id,
    object: 'response',
    created_at: r.createdAt,
    completed_at: status === 'completed' ? r.createdAt : null,
    status,
    incomplete_details: null,
    model: r.model,
    previous_response_id: null,
    instructions: typeof b.instructions === 'string' ? b.instructions : null,
    output,
    error: null,
    tools: Array.isArray(b.tools) ? b.tools : [],
    tool_choice: 'auto',
    truncation: 'disabled',
    parallel_tool_calls: true,
    text: { format: { type: 'text' } },
    top_p: typeof b.top_p === 'number' ? b.top_p : 1,
    temperature: typeof b.temperature === 'number' ? b.temperature : 1,
    reasoning: null,
    usage: usage
      ? {
          input_tokens: r.prompt,
          output_tokens: completion,
          total_tokens: r.prompt + completion,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        }
      : null,
    max_output_tokens: typeof b.max_output_tokens === 'number' ? b.max_output_tokens : null,
    store: false,
    metadata: isObject(b.metadata) ? b.metadata : {},
  };
}

function finalOutput(r: Reply): Json[] {
  if (r.plan.call !== null) return [callItem(r, 'completed', r.plan.call.arguments)];
  return [messageItem(r, 'completed', r.plan.text.join(''))];
}

/** The stream's events, each a whole SSE frame, in Ollama's order. */
function events(r: Reply): string[] {
  const out: string[] = [];
  const ev = (type: string, data: Json): void => {
    out.push(`event: ${type}\ndata: ${sortedJson({ ...data, type, sequence_number: out.length })}\n\n`);
  };
  ev('response.created', { response: responseObject(r, 'in_progress', [], false) });
  ev('response.in_progress', { response: responseObject(r, 'in_progress', [], false) });
  const call = r.plan.call;
  if (call !== null) {
    ev('response.output_item.added', { output_index: 0, item: callItem(r, 'in_progress', '') });
    ev('response.function_call_arguments.delta', { output_index: 0, item_id: r.fcId, delta: call.arguments });
    ev('response.function_call_arguments.done', { output_index: 0, item_id: r.fcId, arguments: call.arguments });
    ev('response.output_item.done', { output_index: 0, item: callItem(r, 'completed', call.arguments) });
  } else {
    const ids = { output_index: 0, item_id: r.msgId, content_index: 0 };
    ev('response.output_item.added', { output_index: 0, item: messageItem(r, 'in_progress', null) });
    ev('response.content_part.added', { ...ids, part: outputText('') });
    for (const t of r.plan.text) ev('response.output_text.delta', { ...ids, delta: t, logprobs: [] });
    const text = r.plan.text.join('');
    ev('response.output_text.done', { ...ids, text, logprobs: [] });
    ev('response.content_part.done', { ...ids, part: outputText(text) });
    ev('response.output_item.done', { output_index: 0, item: messageItem(r, 'completed', text) });
  }
  ev('response.completed', { response: responseObject(r, 'completed', finalOutput(r), true) });
  return out;
}

/** Ollama's Go decoding of the fields it types; the rest is ignored. */
type Checked = { ok: false; status: number; message: string } | { ok: true; body: Json };

function validate(parsed: ParsedBody, env: ChatEnv): Checked {
  if (!parsed.ok) return { ok: false, status: 400, message: parsed.message };
  const body = parsed.value;
  if (!isObject(body))
    return { ok: false, status: 400, message: 'json: cannot unmarshal into Go value of type ResponsesRequest' };
  const { model, input, stream } = body;
  if (model !== undefined && model !== null && typeof model !== 'string')
    return {
      ok: false,
      status: 400,
      message: 'json: cannot unmarshal into Go struct field ResponsesRequest.model of type string',
    };
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean')
    return {
      ok: false,
      status: 400,
      message: 'json: cannot unmarshal into Go struct field ResponsesRequest.stream of type bool',
    };
  if (Array.isArray(input))
    for (const item of input) {
      const type = isObject(item) ? item.type : undefined;
      if (type === 'item_reference')
        return { ok: false, status: 400, message: `unsupported input item type: ${String(type)}` };
    }
  if (typeof model !== 'string' || !env.hasModel(model))
    return { ok: false, status: 404, message: `model "${String(model ?? '')}" not found, try pulling it first` };
  return { ok: true, body };
}

/** Answers one Responses request whose body has been read and recorded. */
export function handleResponses(job: Job, parsed: ParsedBody, env: ChatEnv): void {
  const v = validate(parsed, env);
  if (!v.ok) {
    sendJson(job.res, v.status, errorBody(v.status, v.message));
    return;
  }
  const body = v.body;
  const messages = asMessages(body.input, body.instructions);
  const k = resolveKnobs(env.knobs(), messages);
  const stream = body.stream === true;
  const maxTokens = typeof body.max_output_tokens === 'number' ? body.max_output_tokens : null;
  if (k.fail === 'hang' || (k.fail === 'hang-mid-stream' && !stream)) return;
  if (k.fail === 'http-error') {
    sendJson(job.res, k.errorStatus, errorBody(k.errorStatus, runnerErrorMessage(k.errorStatus)));
    return;
  }
  const reply: Reply = {
    id: itemId('resp'),
    createdAt: nowSeconds(),
    model: body.model as string,
    body,
    prompt: countPromptTokens(messages),
    plan: planOf(body, k, maxTokens),
    msgId: itemId('msg'),
    fcId: itemId('fc'),
  };
  if (HOSTILE_MODES.has(k.fail)) {
    if (k.fail === 'endless-body' && stream) {
      endlessEvents(job, reply);
      return;
    }
    const req: SimChatRequest = { model: reply.model, body, messages, stream, includeUsage: false, maxTokens };
    hostile(job, req, k, () => env.changed(job.record));
    return;
  }
  if (!stream) {
    const text = `${JSON.stringify(responseObject(reply, 'completed', finalOutput(reply), true))}\n`;
    later(job, k.firstTokenDelayMs, () => sendJson(job.res, 200, text, JSON_CT));
    return;
  }
  later(job, k.firstTokenDelayMs, () => streamEvents(job, events(reply), k, env));
}

function later(job: Job, ms: number, fn: () => void): void {
  if (ms <= 0) {
    fn();
    return;
  }
  job.timer = setTimeout(() => {
    job.timer = null;
    if (!job.done) fn();
  }, ms);
}

/** The events, paced at tokensPerSecond; `hang-mid-stream` stops after failAfterChunks of them, the body left open. */
function streamEvents(job: Job, frames: string[], k: Readonly<Knobs>, env: ChatEnv): void {
  const { res, record } = job;
  res.writeHead(200, SSE_HEADERS);
  const interval = k.tokensPerSecond > 0 ? 1000 / k.tokensPerSecond : 0;
  const limit = k.fail === 'hang-mid-stream' ? Math.min(k.failAfterChunks, frames.length) : frames.length;
  let i = 0;
  const step = (): void => {
    while (!job.done && i < limit) {
      const ok = res.write(frames[i++]);
      record.chunksSent = i;
      env.changed(record);
      if (i < limit && interval > 0) {
        later(job, interval, step);
        return;
      }
      if (i < limit && !ok) {
        res.once('drain', step);
        return;
      }
    }
    if (job.done) return;
    if (k.fail === 'hang-mid-stream') res.flushHeaders();
    else if (k.fail === 'eof-mid-stream') res.end();
    else res.end();
  };
  step();
}

/** Well-formed delta events for ever, never completed: only the proxy's bounds end it. */
function endlessEvents(job: Job, r: Reply): void {
  const { res } = job;
  res.writeHead(200, SSE_HEADERS);
  let n = 0;
  const ids = { output_index: 0, item_id: r.msgId, content_index: 0 };
  const frame = (type: string, data: Json): string =>
    `event: ${type}\ndata: ${sortedJson({ ...data, type, sequence_number: n++ })}\n\n`;
  res.write(frame('response.created', { response: responseObject(r, 'in_progress', [], false) }));
  const pump = (): void => {
    while (!job.done) {
      let s = '';
      for (let j = 0; j < 256; j++)
        s += frame('response.output_text.delta', { ...ids, delta: tokenText(n), logprobs: [] });
      job.record.chunksSent = n;
      if (!res.write(s)) {
        res.once('drain', pump);
        return;
      }
    }
  };
  job.timer = setTimeout(pump, 0);
}

/** Gin's answer for a route it does not have: what an Ollama before 0.13.3 says to /v1/responses. */
export function routeMissing(job: Job): void {
  job.res.writeHead(404, { 'Content-Type': 'text/plain' });
  job.res.end('404 page not found');
}
