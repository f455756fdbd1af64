import { obError } from '../errors.js';
import type { Media } from './chat-messages.js';
import { checkFieldNames, fieldSet, parseJsonBody } from './json-body.js';
import {
  type Json,
  given,
  invalid,
  isObject,
  optionalBoolean,
  optionalInteger,
  optionalNumber,
  optionalString,
} from './request-checks.js';

/**
 * Validation of POST /v1/responses (docs/contract.md §6): the fields OpenAI documents, checked for type
 * and range with the field's path in `param`; fields not listed are forwarded. The client's bytes
 * go upstream untouched: nothing here needs rewriting (a stream's usage comes in its
 * `response.completed` event, unasked).
 */
export interface ResponsesRequest {
  model: string;
  stream: boolean;
  media: Media;
  /** `max_output_tokens`, or null. */
  completionCap: number | null;
  /** temperature and top_p as given (checked numbers), or null: for traces. */
  temperature: number | null;
  topP: number | null;
  /** The body as parsed: what a translation to chat completions reads, where the model server has no /v1/responses. */
  body: Json;
}

// The fields OpenAI's Responses API and Ollama decode at each position. A key that differs from
// one of these only by case is refused (Go's decoder would take it for the field: json-body.ts).
const TOP = fieldSet([
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'max_output_tokens',
  'max_tool_calls',
  'temperature',
  'top_p',
  'top_logprobs',
  'stream',
  'stream_options',
  'text',
  'reasoning',
  'store',
  'include',
  'metadata',
  'parallel_tool_calls',
  'previous_response_id',
  'conversation',
  'truncation',
  'user',
  'service_tier',
  'background',
  'prompt',
  'prompt_cache_key',
  'safety_identifier',
]);
const ITEM = fieldSet([
  'type',
  'id',
  'role',
  'content',
  'status',
  'call_id',
  'name',
  'arguments',
  'output',
  'summary',
  'encrypted_content',
]);
const PART = fieldSet(['type', 'text', 'image_url', 'file_id', 'file_data', 'filename', 'detail', 'file_url']);
const TOOL = fieldSet(['type', 'name', 'description', 'parameters', 'strict']);

const ROLES = ['user', 'assistant', 'system', 'developer'];
const TOOL_CHOICES = ['none', 'auto', 'required'];

/** The body as every decoder reads it (json-body.ts), its keys checked against the fields decoded at each position. */
export function parseResponsesBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkFieldNames(body, TOP.fields, TOP.folded, '');
  if (Array.isArray(body.input))
    for (let i = 0; i < body.input.length; i++) {
      const item: unknown = body.input[i];
      if (!isObject(item)) continue;
      checkFieldNames(item, ITEM.fields, ITEM.folded, `input[${i}]`);
      if (Array.isArray(item.content))
        for (let j = 0; j < item.content.length; j++) {
          const part: unknown = item.content[j];
          if (isObject(part)) checkFieldNames(part, PART.fields, PART.folded, `input[${i}].content[${j}]`);
        }
    }
  if (Array.isArray(body.tools))
    for (let i = 0; i < body.tools.length; i++) {
      const tool: unknown = body.tools[i];
      if (isObject(tool)) checkFieldNames(tool, TOOL.fields, TOOL.folded, `tools[${i}]`);
    }
  return body;
}

/**
 * Fields the instance cannot honour, refused rather than ignored: a model server keeps no
 * responses or conversations (Ollama drops `previous_response_id` silently, and the client's
 * next turn is answered without its context).
 */
function refuseStateful(body: Json): void {
  for (const field of ['previous_response_id', 'conversation'] as const) {
    if (given(body[field]))
      throw obError('unsupported_parameter', {
        param: field,
        message: `${field} is not supported: this deployment keeps no responses or conversations. Send the whole conversation in \`input\` (with store: false, SDKs send every item).`,
      });
  }
}

function checkPart(part: unknown, path: string, media: Media): void {
  if (!isObject(part)) invalid(path, `${path} must be an object like {"type":"input_text","text":"…"}.`);
  if (typeof part.type !== 'string') invalid(`${path}.type`, `${path}.type must be a string such as "input_text".`);
  if (part.type === 'input_text' || part.type === 'output_text') {
    if (typeof part.text !== 'string') invalid(`${path}.text`, `${path}.text must be a string.`);
  } else if (part.type === 'input_image' || part.type === 'input_file') {
    media.parts += 1;
    for (const k of ['image_url', 'file_data'] as const) {
      const v = part[k];
      if (typeof v === 'string') media.chars += v.length;
    }
  }
}

function checkItem(item: unknown, path: string, media: Media): void {
  if (!isObject(item)) invalid(path, `${path} must be an object: a message {"role":"user","content":"…"} or an item.`);
  const type = item.type;
  if (given(type) && typeof type !== 'string') invalid(`${path}.type`, `${path}.type must be a string.`);
  if (type === undefined || type === null || type === 'message') {
    if (typeof item.role !== 'string' || !ROLES.includes(item.role))
      invalid(`${path}.role`, `${path}.role must be one of ${ROLES.join(', ')}.`);
    const content = item.content;
    if (typeof content === 'string') return;
    if (!Array.isArray(content))
      invalid(`${path}.content`, `${path}.content must be a string or an array of content parts.`);
    for (let j = 0; j < content.length; j++) checkPart(content[j], `${path}.content[${j}]`, media);
  } else if (type === 'function_call') {
    for (const k of ['call_id', 'name', 'arguments'] as const)
      if (typeof item[k] !== 'string') invalid(`${path}.${k}`, `${path}.${k} must be a string.`);
  } else if (type === 'function_call_output') {
    if (typeof item.call_id !== 'string') invalid(`${path}.call_id`, `${path}.call_id must be a string.`);
    if (typeof item.output !== 'string' && !Array.isArray(item.output))
      invalid(`${path}.output`, `${path}.output must be a string or an array of content parts.`);
  }
}

function checkTools(tools: unknown): void {
  if (!given(tools)) return;
  if (!Array.isArray(tools)) invalid('tools', 'tools must be an array.');
  for (let i = 0; i < tools.length; i++) {
    const t: unknown = tools[i];
    const path = `tools[${i}]`;
    if (!isObject(t)) invalid(path, `${path} must be an object like {"type":"function","name":"…","parameters":{…}}.`);
    if (typeof t.type !== 'string') invalid(`${path}.type`, `${path}.type must be a string such as "function".`);
    if (t.type === 'function') {
      if (typeof t.name !== 'string' || t.name === '')
        invalid(`${path}.name`, `${path}.name must be a non-empty string.`);
      if (given(t.parameters) && !isObject(t.parameters))
        invalid(`${path}.parameters`, `${path}.parameters must be a JSON Schema object.`);
      optionalString(t.description, `${path}.description`);
      optionalBoolean(t.strict, `${path}.strict`);
    }
  }
}

export function validateResponsesRequest(body: Json): ResponsesRequest {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  refuseStateful(body);

  const media: Media = { parts: 0, chars: 0 };
  const input = body.input;
  if (!given(input)) invalid('input', 'input is required: a string, or a list of messages and items.');
  if (typeof input !== 'string') {
    if (!Array.isArray(input)) invalid('input', 'input must be a string or an array of items.');
    for (let i = 0; i < input.length; i++) checkItem(input[i], `input[${i}]`, media);
  }

  optionalString(body.instructions, 'instructions');
  checkTools(body.tools);
  const choice = body.tool_choice;
  if (given(choice) && !isObject(choice) && (typeof choice !== 'string' || !TOOL_CHOICES.includes(choice)))
    invalid('tool_choice', `tool_choice must be one of ${TOOL_CHOICES.join(', ')}, or an object naming a tool.`);
  optionalInteger(body.max_output_tokens, 'max_output_tokens', 1, 10_000_000);
  optionalNumber(body.temperature, 'temperature', 0, 2);
  optionalNumber(body.top_p, 'top_p', 0, 1);
  optionalBoolean(body.stream, 'stream');
  if (given(body.text) && !isObject(body.text))
    invalid('text', 'text must be an object like {"format":{"type":"text"}}.');
  if (given(body.reasoning) && !isObject(body.reasoning))
    invalid('reasoning', 'reasoning must be an object like {"effort":"low"}.');
  optionalBoolean(body.store, 'store');
  const include = body.include;
  if (given(include) && (!Array.isArray(include) || !include.every((v) => typeof v === 'string')))
    invalid('include', 'include must be an array of strings.');
  const metadata = body.metadata;
  if (given(metadata)) {
    if (!isObject(metadata)) invalid('metadata', 'metadata must be an object of strings.');
    for (const k in metadata)
      if (typeof metadata[k] !== 'string') invalid(`metadata.${k}`, `metadata.${k} must be a string.`);
  }
  optionalBoolean(body.parallel_tool_calls, 'parallel_tool_calls');

  const cap = body.max_output_tokens;
  return {
    model,
    stream: body.stream === true,
    media,
    completionCap: typeof cap === 'number' ? cap : null,
    temperature: typeof body.temperature === 'number' ? body.temperature : null,
    topP: typeof body.top_p === 'number' ? body.top_p : null,
    body,
  };
}
