import {
  type Json,
  given,
  invalid,
  isObject,
  oneOf,
  optionalBoolean,
  optionalNumber,
  optionalString,
  requiredString,
} from '../../wire/request-checks.js';
import type { ResponseEcho } from './object.js';
import { messagesOf } from './input.js';

/**
 * A Responses API request (`POST /v1/responses`) as a chat completions request, for a model
 * server that serves only `/v1/chat/completions`: its input items as turns (apis/responses/input.ts),
 * its tools, tool choice, format, reasoning and sampling fields as chat's. It refuses only what
 * chat cannot express (or what the field must be to be translated at all): 400 `invalid_request`
 * with the field's path in the Responses request as `param`. Limits that are OpenAI's own (a
 * function name's characters, metadata's sizes) are the model server's to apply.
 *
 * `previous_response_id` and `conversation` are not read here: the route refuses them first.
 */

export interface ChatTranslation {
  /** The chat completions body to send upstream. */
  chat: Json;
  stream: boolean;
  /** What the translated response repeats of the request (apis/responses/from-chat.ts, apis/responses/stream.ts). */
  echo: ResponseEcho;
}

export interface TranslateOptions {
  /**
   * Tools other than function tools (`web_search`, `file_search`, `mcp`, `namespace`, …) have no
   * chat equivalent: `refuse` (the default) answers 400 naming the tool, `drop` leaves them out,
   * as a model server that cannot run them would never call them.
   */
  otherTools?: 'refuse' | 'drop';
}

const FORMAT_TYPES = ['text', 'json_object', 'json_schema'];
const TOOL_CHOICE_MODES = ['none', 'auto', 'required'];

interface Tools {
  chat: Json[];
  echo: Json[];
  names: Set<string>;
}

function toolsOf(tools: unknown, otherTools: 'refuse' | 'drop'): Tools {
  const out: Tools = { chat: [], echo: [], names: new Set() };
  if (!given(tools)) return out;
  if (!Array.isArray(tools))
    invalid('tools', 'tools must be a list of function tools like {"type":"function","name":"…","parameters":{…}}.');
  for (let j = 0; j < tools.length; j++) {
    const tool: unknown = tools[j];
    const path = `tools[${j}]`;
    if (!isObject(tool)) invalid(path, `${path} must be an object like {"type":"function","name":"…"}.`);
    if (tool.type !== 'function') {
      if (otherTools === 'drop' && typeof tool.type === 'string') continue;
      invalid(
        `${path}.type`,
        `${path}.type ${JSON.stringify(tool.type)} is not served: the model server behind this key runs function tools only. Remove the tool, or describe it as {"type":"function",…}.`,
      );
    }
    const name = requiredString(tool.name, `${path}.name`, "the function's name");
    optionalString(tool.description, `${path}.description`);
    if (given(tool.parameters) && !isObject(tool.parameters))
      invalid(`${path}.parameters`, `${path}.parameters must be a JSON Schema object.`);
    optionalBoolean(tool.strict, `${path}.strict`);
    const fn: Json = { name };
    if (given(tool.description)) fn.description = tool.description;
    if (given(tool.parameters)) fn.parameters = tool.parameters;
    if (given(tool.strict)) fn.strict = tool.strict;
    out.chat.push({ type: 'function', function: fn });
    out.echo.push({
      type: 'function',
      name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      strict: tool.strict ?? null,
    });
    out.names.add(name);
  }
  return out;
}

function namedFunction(name: unknown, path: string, tools: Tools): string {
  const n = requiredString(name, path, 'the name of one of the function tools');
  if (!tools.names.has(n)) invalid(path, `${path} must name one of the function tools of this request.`);
  return n;
}

/** tool_choice in chat's shape; `allowed_tools` narrows the tools sent to those it names. */
function toolChoiceOf(choice: unknown, tools: Tools): unknown {
  if (!given(choice)) return undefined;
  if (typeof choice === 'string') {
    oneOf(choice, 'tool_choice', TOOL_CHOICE_MODES);
    return choice;
  }
  if (!isObject(choice))
    invalid('tool_choice', 'tool_choice must be "none", "auto", "required" or {"type":"function","name":"…"}.');
  if (choice.type === 'function')
    return { type: 'function', function: { name: namedFunction(choice.name, 'tool_choice.name', tools) } };
  if (choice.type === 'allowed_tools') {
    oneOf(choice.mode, 'tool_choice.mode', ['auto', 'required']);
    if (!Array.isArray(choice.tools))
      invalid('tool_choice.tools', 'tool_choice.tools must be a list of function tools.');
    const allowed = new Set<string>();
    for (let j = 0; j < choice.tools.length; j++) {
      const t: unknown = choice.tools[j];
      const path = `tool_choice.tools[${j}]`;
      if (!isObject(t) || t.type !== 'function')
        invalid(path, `${path} must be {"type":"function","name":"…"}: only function tools are served.`);
      allowed.add(namedFunction(t.name, `${path}.name`, tools));
    }
    tools.chat = tools.chat.filter((t) => allowed.has((t.function as Json).name as string));
    return choice.mode;
  }
  invalid(
    'tool_choice.type',
    'tool_choice.type must be "function" or "allowed_tools": the model server behind this key runs function tools only.',
  );
}

/** text.format in chat's shape (response_format), and text.verbosity. */
function formatOf(text: unknown, chat: Json): Json {
  if (!given(text)) return { format: { type: 'text' } };
  if (!isObject(text)) invalid('text', 'text must be an object like {"format":{"type":"json_object"}}.');
  const echo: Json = { format: { type: 'text' } };
  const format = text.format;
  if (given(format)) {
    if (!isObject(format)) invalid('text.format', 'text.format must be an object like {"type":"json_object"}.');
    oneOf(format.type, 'text.format.type', FORMAT_TYPES);
    if (format.type === 'json_object') chat.response_format = { type: 'json_object' };
    if (format.type === 'json_schema') {
      if (!isObject(format.schema))
        invalid('text.format.schema', 'text.format.schema is required: the JSON Schema the answer must follow.');
      optionalString(format.name, 'text.format.name');
      optionalString(format.description, 'text.format.description');
      optionalBoolean(format.strict, 'text.format.strict');
      const js: Json = { name: format.name ?? 'response', schema: format.schema };
      if (given(format.description)) js.description = format.description;
      if (given(format.strict)) js.strict = format.strict;
      chat.response_format = { type: 'json_schema', json_schema: js };
    }
    echo.format = format;
  }
  if (given(text.verbosity)) {
    oneOf(text.verbosity, 'text.verbosity', ['low', 'medium', 'high']);
    chat.verbosity = text.verbosity;
    echo.verbosity = text.verbosity;
  }
  return echo;
}

function reasoningOf(reasoning: unknown, chat: Json): Json | null {
  if (!given(reasoning)) return null;
  if (!isObject(reasoning)) invalid('reasoning', 'reasoning must be an object like {"effort":"low"}.');
  const effort = reasoning.effort;
  if (given(effort) && (typeof effort !== 'string' || effort === ''))
    invalid('reasoning.effort', 'reasoning.effort must be a string such as "none", "low", "medium" or "high".');
  const summary = given(reasoning.summary) ? reasoning.summary : reasoning.generate_summary;
  optionalString(summary, 'reasoning.summary');
  if (typeof effort === 'string') chat.reasoning_effort = effort;
  if (!given(effort) && !given(summary)) return null;
  return { effort: effort ?? null, summary: summary ?? null };
}

/** Repeated in the answer as sent; its limits are OpenAI's to keep, not the model server's. */
function metadataOf(meta: unknown): Json {
  if (!given(meta)) return {};
  if (!isObject(meta)) invalid('metadata', 'metadata must be an object of strings.');
  return meta;
}

export function responsesToChat(body: Json, options: TranslateOptions = {}): ChatTranslation {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  if (body.background === true)
    invalid('background', 'background is not served: this gateway keeps no responses. Send the request without it.');
  if (given(body.prompt))
    invalid('prompt', 'prompt (a stored prompt template) is not served: send the instructions and input themselves.');

  const chat: Json = { model, messages: messagesOf(body) };

  const tools = toolsOf(body.tools, options.otherTools ?? 'refuse');
  const toolChoice = toolChoiceOf(body.tool_choice, tools);
  if (tools.chat.length > 0) chat.tools = tools.chat;
  if (toolChoice !== undefined) chat.tool_choice = toolChoice;
  optionalBoolean(body.parallel_tool_calls, 'parallel_tool_calls');
  if (given(body.parallel_tool_calls)) chat.parallel_tool_calls = body.parallel_tool_calls;

  optionalNumber(body.temperature, 'temperature', 0, 2);
  optionalNumber(body.top_p, 'top_p', 0, 1);
  if (given(body.temperature)) chat.temperature = body.temperature;
  if (given(body.top_p)) chat.top_p = body.top_p;
  const cap = body.max_output_tokens;
  if (given(cap) && (typeof cap !== 'number' || !Number.isSafeInteger(cap) || cap < 1))
    invalid('max_output_tokens', 'max_output_tokens must be a positive integer.');
  if (given(cap)) chat.max_tokens = cap;

  const text = formatOf(body.text, chat);
  const reasoning = reasoningOf(body.reasoning, chat);
  const metadata = metadataOf(body.metadata);
  if (given(body.metadata)) chat.metadata = metadata;
  for (const field of ['user', 'safety_identifier', 'prompt_cache_key'] as const) {
    optionalString(body[field], field);
    if (given(body[field])) chat[field] = body[field];
  }
  optionalString(body.truncation, 'truncation');

  const stream = body.stream;
  optionalBoolean(stream, 'stream');
  // Usage is counted per key and reported in response.completed: always asked of the upstream.
  if (stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }

  return {
    chat,
    stream: stream === true,
    echo: {
      instructions: typeof body.instructions === 'string' && body.instructions !== '' ? body.instructions : null,
      tools: tools.echo,
      toolChoice: given(body.tool_choice) ? body.tool_choice : 'auto',
      parallelToolCalls: body.parallel_tool_calls !== false,
      text,
      temperature: typeof body.temperature === 'number' ? body.temperature : 1,
      topP: typeof body.top_p === 'number' ? body.top_p : 1,
      maxOutputTokens: typeof cap === 'number' ? cap : null,
      reasoning,
      metadata,
      truncation: typeof body.truncation === 'string' ? body.truncation : 'disabled',
    },
  };
}
