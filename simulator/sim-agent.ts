/**
 * What an agent sees from a model server, simulated deterministically: a tool call when tools are
 * offered and the last turn is the user's, a final answer after tool results, reasoning from a
 * thinking model, JSON under `response_format`, and Ollama's refusals of inputs it cannot read
 * (http image URLs, null content without tool calls, tool arguments that are not JSON).
 * Three wire flavours: Ollama ≥ 0.32.6, older Ollama, and vLLM (Ollama's openai/openai.go and middleware/openai.go; vLLM's chat_completion/serving.py).
 */

export type Flavor = 'ollama' | 'ollama-old' | 'vllm';
export const FLAVORS: readonly Flavor[] = ['ollama', 'ollama-old', 'vllm'];

type Json = Record<string, unknown>;

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** A reply other than the plain "t0 t1 …" tokens; null from planReply when none applies. */
export interface AgentReply {
  reasoning: string[];
  content: string[];
  toolCalls: ToolCall[];
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A string that exercises every escape a relay could get wrong. */
export const SAMPLE_STRING = 'Zürich "Ø" \\ 🌧\n';

/** A value that satisfies a JSON Schema's common keywords, the same every time. */
export function sampleOf(schema: unknown, depth = 0): unknown {
  if (!isObject(schema) || depth > 8) return SAMPLE_STRING;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ('const' in schema) return schema.const;
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return SAMPLE_STRING;
    case 'integer':
      return 3;
    case 'number':
      return 2.5;
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array':
      return [sampleOf(schema.items, depth + 1)];
    default: {
      const out: Json = {};
      if (isObject(schema.properties))
        for (const [k, v] of Object.entries(schema.properties)) out[k] = sampleOf(v, depth + 1);
      return out;
    }
  }
}

/** Go's base64.StdEncoding: padded, whole quanta, no other characters. */
const STD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Ollama's refusal of an image part's URL, or null (O-compat decodeImageURL): http(s) URLs are
 * not fetched, and a data URL must be base64 of an image type it reads.
 */
function refuseImageUrl(url: unknown): string | null {
  if (typeof url === 'string' && /^https?:\/\//.test(url))
    return 'image URLs are not currently supported, please use base64 encoded data instead';
  const data = typeof url === 'string' ? /^data:(?:image\/(?:jpeg|jpg|png|webp))?;base64,(.*)$/s.exec(url) : null;
  return data !== null && STD_BASE64.test(data[1]!) ? null : 'invalid image input';
}

/** Ollama's 400 for a turn it cannot read, or null (O-compat FromChatRequest). */
export function refuseInput(messages: readonly unknown[]): string | null {
  for (const m of messages) {
    if (!isObject(m)) return 'invalid message format';
    const content = m.content;
    if (content === null || content === undefined) {
      if (!Array.isArray(m.tool_calls) || m.tool_calls.length === 0) return `invalid message content type: <nil>`;
    } else if (Array.isArray(content)) {
      for (const part of content) {
        if (!isObject(part)) return 'invalid message format';
        if (part.type === 'text') continue;
        if (part.type === 'input_audio') continue;
        if (part.type !== 'image_url') return 'invalid message format';
        const url =
          typeof part.image_url === 'string'
            ? part.image_url
            : isObject(part.image_url)
              ? part.image_url.url
              : undefined;
        const refused = refuseImageUrl(url);
        if (refused !== null) return refused;
      }
    }
    if (Array.isArray(m.tool_calls)) {
      for (const call of m.tool_calls) {
        const args: unknown = isObject(call) && isObject(call.function) ? call.function.arguments : undefined;
        try {
          JSON.parse(typeof args === 'string' ? args : '');
        } catch {
          return 'invalid tool call arguments';
        }
      }
    }
  }
  return null;
}

let callSeq = 0;

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * Tool-call ids, the same sequence on every run. Ollama ≥ 0.33 names them as its llama-server
 * runner does: 32 letters and digits, no `call_` (seen on v0.33.0-rc2; docs/compatibility.md).
 * Older Ollama: `call_` + 8 lowercase alphanumerics. vLLM: `chatcmpl-tool-…`.
 */
function callId(flavor: Flavor): string {
  const seq = ++callSeq;
  const n = (seq * 2_654_435_761) % 36 ** 8;
  const s = n.toString(36).padStart(8, '0');
  if (flavor === 'vllm') return `chatcmpl-tool-${s}`;
  if (flavor === 'ollama-old') return `call_${s}`;
  let id = '';
  for (let i = 0, x = seq; i < 32; i++) {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    id += ALNUM[x % ALNUM.length]!;
  }
  return id;
}

const words = (text: string): string[] => text.split(/(?<= )/).filter((w) => w !== '');

/** Splits a JSON text into a few pieces, as a model writes it token by token. */
const pieces = (text: string, n = 6): string[] => {
  const size = Math.max(1, Math.ceil(text.length / n));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
};

export interface PlanInput {
  body: Json;
  /** The simulated model thinks (`--reasoning`), as qwen3.6 does by default. */
  reasoning: boolean;
  flavor: Flavor;
}

/**
 * The reply to an agent's request, or null for a plain chat (which keeps the "t0 t1 …" tokens the
 * other suites count on).
 */
export function planReply({ body, reasoning, flavor }: PlanInput): AgentReply | null {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const last: unknown = messages[messages.length - 1];
  const lastRole = isObject(last) ? last.role : undefined;
  const thinks = reasoning && body.reasoning_effort !== 'none';
  const out: AgentReply = { reasoning: thinks ? ['r0 ', 'r1 ', 'r2 '] : [], content: [], toolCalls: [] };
  const tools = Array.isArray(body.tools)
    ? (body.tools.filter((t) => isObject(t) && isObject(t.function)) as Json[])
    : [];
  if (tools.length > 0 && lastRole === 'user' && body.tool_choice !== 'none') {
    const chosen =
      isObject(body.tool_choice) && isObject(body.tool_choice.function) ? body.tool_choice.function.name : undefined;
    const tool = tools.find((t) => (t.function as Json).name === chosen) ?? (tools[0] as Json);
    const fn = tool.function as Json;
    out.toolCalls.push({
      id: callId(flavor),
      name: String(fn.name),
      arguments: JSON.stringify(sampleOf(fn.parameters)),
    });
    return out;
  }
  if (lastRole === 'tool') {
    const result = typeof last === 'object' && last !== null ? (last as Json).content : '';
    const name = typeof (last as Json).name === 'string' ? ((last as Json).name as string) : 'the tool';
    out.content = words(`Final answer from ${name}: ${typeof result === 'string' ? result : JSON.stringify(result)}`);
    return out;
  }
  const rf = body.response_format;
  if (isObject(rf) && (rf.type === 'json_object' || rf.type === 'json_schema')) {
    const schema = isObject(rf.json_schema) ? rf.json_schema.schema : undefined;
    const value = rf.type === 'json_schema' ? sampleOf(schema) : { answer: 't0 t1 t2' };
    out.content = pieces(JSON.stringify(value));
    return out;
  }
  return thinks ? { ...out, content: words('t0 t1 t2 t3 ') } : null;
}

export function completionTokens(r: AgentReply): number {
  return r.reasoning.length + r.content.length + r.toolCalls.length * 8;
}

export function finishReason(r: AgentReply): string {
  return r.toolCalls.length > 0 ? 'tool_calls' : 'stop';
}

export interface Meta {
  id: string;
  created: number;
  model: string;
  flavor: Flavor;
}

const toolCallJson = (c: ToolCall, index: number): Json => ({
  id: c.id,
  index,
  type: 'function',
  function: { name: c.name, arguments: c.arguments },
});

/** A non-streaming body in the flavour's shape. */
export function agentCompletion(r: AgentReply, m: Meta, promptTokens: number): string {
  const message: Json = { role: 'assistant' };
  const content = r.content.join('');
  if (m.flavor === 'vllm') {
    message.content = r.toolCalls.length > 0 && content === '' ? null : content;
    if (r.reasoning.length > 0) message.reasoning = r.reasoning.join('');
    message.tool_calls = r.toolCalls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
  } else {
    message.content = content;
    if (r.reasoning.length > 0) message.reasoning = r.reasoning.join('');
    if (r.toolCalls.length > 0) message.tool_calls = r.toolCalls.map(toolCallJson);
  }
  const completion = completionTokens(r);
  const choice: Json = {
    index: 0,
    message,
    ...(m.flavor === 'vllm' ? { logprobs: null } : {}),
    finish_reason: finishReason(r),
    ...(m.flavor === 'vllm' ? { stop_reason: null } : {}),
  };
  const body: Json = {
    id: m.id,
    object: 'chat.completion',
    created: m.created,
    model: m.model,
    ...(m.flavor === 'vllm' ? {} : { system_fingerprint: 'fp_ollama' }),
    choices: [choice],
    usage: { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion },
  };
  return `${JSON.stringify(body)}\n`;
}

/** Every frame of the stream before the usage chunk and [DONE], in the flavour's shape. */
export function agentFrames(r: AgentReply, m: Meta): string[] {
  const head = {
    id: m.id,
    object: 'chat.completion.chunk',
    created: m.created,
    model: m.model,
    ...(m.flavor === 'vllm' ? {} : { system_fingerprint: 'fp_ollama' }),
  };
  const frame = (delta: Json, finish: string | null = null): string => {
    const choice: Json =
      m.flavor === 'vllm'
        ? { index: 0, delta, logprobs: null, finish_reason: finish }
        : { index: 0, delta, finish_reason: finish };
    return `data: ${JSON.stringify({ ...head, choices: [choice] })}\n\n`;
  };
  // Ollama (≥ 0.32.6) writes `content` on every delta but the finish chunk's: "" beside reasoning
  // and tool calls (seen on v0.33.0-rc2).
  const blank: Json = m.flavor === 'ollama' ? { content: '' } : {};
  const deltas: Json[] = [];
  for (const t of r.reasoning) deltas.push({ ...blank, reasoning: t });
  for (const t of r.content) deltas.push({ content: t });
  r.toolCalls.forEach((c, index) => {
    if (m.flavor !== 'vllm') {
      deltas.push({ ...blank, tool_calls: [toolCallJson(c, index)] });
      return;
    }
    // vLLM streams a call as deltas: id, type and name first, then the arguments in fragments.
    deltas.push({ tool_calls: [{ id: c.id, type: 'function', index, function: { name: c.name, arguments: '' } }] });
    for (const p of pieces(c.arguments)) deltas.push({ tool_calls: [{ index, function: { arguments: p } }] });
  });
  const finish = finishReason(r);
  if (m.flavor === 'ollama-old') {
    // Before v0.32.6: role on every chunk, the finish reason on the last content chunk.
    return deltas.map((d, i) =>
      frame(
        { role: 'assistant', ...('content' in d ? {} : { content: '' }), ...d },
        i === deltas.length - 1 ? finish : null,
      ),
    );
  }
  const frames: string[] = [];
  if (m.flavor === 'vllm') frames.push(frame({ role: 'assistant', content: '' }));
  deltas.forEach((d, i) =>
    frames.push(
      frame(
        i === 0 && m.flavor === 'ollama' ? { role: 'assistant', ...('content' in d ? {} : { content: '' }), ...d } : d,
      ),
    ),
  );
  frames.push(frame({}, finish));
  return frames;
}
