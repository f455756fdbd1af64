import type { Media } from './chat-messages.js';
import { checkFieldNames, fieldSet, parseJsonBody } from './json-body.js';
import {
  type Json,
  given,
  invalid,
  isObject,
  oneOf,
  optionalBoolean,
  optionalInteger,
  optionalNumber,
  optionalString,
  requiredString,
} from './request-checks.js';

/**
 * Validation of POST /v1/messages, Anthropic's Messages API (docs/contract.md §6): the fields
 * Anthropic documents, checked for type and range with the field's path in `param`; block types
 * and fields not listed are forwarded (Anthropic adds them often; Ollama skips what it does not
 * know). The client's bytes go upstream untouched: a stream's usage comes in its `message_start`
 * and `message_delta` events, unasked.
 */
export interface MessagesRequest {
  model: string;
  stream: boolean;
  media: Media;
  /** `max_tokens`: required by this API. */
  completionCap: number;
  /** temperature and top_p as given (checked numbers), or null: for traces. */
  temperature: number | null;
  topP: number | null;
}

// What Ollama's Go structs decode at each position (its anthropic/anthropic.go), and Anthropic's
// own fields there. A key that differs from one of these only by case is refused: Go's decoder
// would take it for the field (json-body.ts).
const TOP = fieldSet([
  'model',
  'max_tokens',
  'messages',
  'system',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'tools',
  'tool_choice',
  'thinking',
  'metadata',
  'output_config',
  'service_tier',
  'container',
  'mcp_servers',
  'context_management',
]);
const MESSAGE = fieldSet(['role', 'content']);
const BLOCK = fieldSet([
  'type',
  'text',
  'citations',
  'source',
  'id',
  'name',
  'input',
  'tool_use_id',
  'content',
  'is_error',
  'thinking',
  'signature',
  'cache_control',
  'data',
]);
const SOURCE = fieldSet(['type', 'media_type', 'data', 'url']);
const TOOL = fieldSet(['type', 'name', 'description', 'input_schema', 'max_uses', 'cache_control']);
const TOOL_CHOICE = fieldSet(['type', 'name', 'disable_parallel_tool_use']);
const THINKING = fieldSet(['type', 'budget_tokens']);
const METADATA = fieldSet(['user_id']);

function checkBlockNames(block: Json, path: string): void {
  checkFieldNames(block, BLOCK.fields, BLOCK.folded, path);
  if (isObject(block.source)) checkFieldNames(block.source, SOURCE.fields, SOURCE.folded, `${path}.source`);
  if (Array.isArray(block.content))
    block.content.forEach((inner, k) => {
      if (isObject(inner)) checkBlockNames(inner, `${path}.content[${k}]`);
    });
}

/** Keys a case-insensitive decoder would read as another field, at every position Ollama decodes. */
function checkNames(body: Json): void {
  checkFieldNames(body, TOP.fields, TOP.folded, '');
  if (Array.isArray(body.messages))
    body.messages.forEach((m, i) => {
      if (!isObject(m)) return;
      checkFieldNames(m, MESSAGE.fields, MESSAGE.folded, `messages[${i}]`);
      if (Array.isArray(m.content))
        m.content.forEach((b, j) => {
          if (isObject(b)) checkBlockNames(b, `messages[${i}].content[${j}]`);
        });
    });
  if (Array.isArray(body.system))
    body.system.forEach((b, j) => {
      if (isObject(b)) checkBlockNames(b, `system[${j}]`);
    });
  if (Array.isArray(body.tools))
    body.tools.forEach((t, j) => {
      if (isObject(t)) checkFieldNames(t, TOOL.fields, TOOL.folded, `tools[${j}]`);
    });
  if (isObject(body.tool_choice))
    checkFieldNames(body.tool_choice, TOOL_CHOICE.fields, TOOL_CHOICE.folded, 'tool_choice');
  if (isObject(body.thinking)) checkFieldNames(body.thinking, THINKING.fields, THINKING.folded, 'thinking');
  if (isObject(body.metadata)) checkFieldNames(body.metadata, METADATA.fields, METADATA.folded, 'metadata');
}

/** The body as every decoder reads it, or 400 invalid_json (json-body.ts). */
export function parseMessagesBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkNames(body);
  return body;
}

// Anthropic's rule for a custom tool's name.
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;

function checkImage(block: Json, path: string, media: Media): void {
  const source = block.source;
  if (!isObject(source))
    invalid(
      `${path}.source`,
      `${path}.source is required: {"type":"base64","media_type","data"} or {"type":"url","url"}.`,
    );
  oneOf(source.type, `${path}.source.type`, ['base64', 'url']);
  if (source.type === 'base64') {
    requiredString(source.media_type, `${path}.source.media_type`, 'the image type, such as "image/png"');
    const data = requiredString(source.data, `${path}.source.data`, 'the image, base64-encoded');
    media.parts += 1;
    media.chars += data.length;
  } else requiredString(source.url, `${path}.source.url`, "the image's URL");
}

/** One content block; `inToolResult`: inside a tool_result's content, where only text and images go. */
function checkBlock(block: unknown, path: string, role: string, media: Media, inToolResult: boolean): void {
  if (!isObject(block)) invalid(path, `${path} must be a content block object with a "type".`);
  const type = requiredString(block.type, `${path}.type`, 'the block type, such as "text"');
  if (inToolResult && type !== 'text' && type !== 'image')
    invalid(`${path}.type`, `${path}.type must be "text" or "image" inside a tool_result.`);
  switch (type) {
    case 'text':
      requiredString(block.text, `${path}.text`, "the block's text");
      if (given(block.citations) && !Array.isArray(block.citations))
        invalid(`${path}.citations`, `${path}.citations must be an array.`);
      break;
    case 'image':
      checkImage(block, path, media);
      break;
    case 'tool_use':
      if (role !== 'assistant') invalid(`${path}.type`, `${path}: tool_use blocks belong to assistant turns.`);
      requiredString(block.id, `${path}.id`, "the tool call's id");
      requiredString(block.name, `${path}.name`, "the tool's name");
      if (!isObject(block.input)) invalid(`${path}.input`, `${path}.input is required: the tool's input, an object.`);
      break;
    case 'tool_result': {
      if (role !== 'user') invalid(`${path}.type`, `${path}: tool_result blocks belong to user turns.`);
      requiredString(block.tool_use_id, `${path}.tool_use_id`, 'the id of the tool_use it answers');
      optionalBoolean(block.is_error, `${path}.is_error`);
      const content = block.content;
      if (given(content) && typeof content !== 'string') {
        if (!Array.isArray(content))
          invalid(`${path}.content`, `${path}.content must be a string or an array of text and image blocks.`);
        content.forEach((b, k) => checkBlock(b, `${path}.content[${k}]`, role, media, true));
      }
      break;
    }
    case 'thinking':
      if (role !== 'assistant') invalid(`${path}.type`, `${path}: thinking blocks belong to assistant turns.`);
      requiredString(block.thinking, `${path}.thinking`, "the model's thinking, as it was given");
      optionalString(block.signature, `${path}.signature`);
      break;
    default:
      // Other block types (documents, redacted thinking, server tools' results) are forwarded.
      break;
  }
  if (given(block.cache_control) && !isObject(block.cache_control))
    invalid(`${path}.cache_control`, `${path}.cache_control must be an object like {"type":"ephemeral"}.`);
}

function checkMessages(messages: unknown, media: Media): void {
  if (!given(messages)) invalid('messages', 'messages is required: the conversation, as user and assistant turns.');
  if (!Array.isArray(messages) || messages.length === 0)
    invalid('messages', 'messages must be a non-empty array of {"role","content"} turns.');
  messages.forEach((m, i) => {
    const path = `messages[${i}]`;
    if (!isObject(m)) invalid(path, `${path} must be an object with "role" and "content".`);
    if (!given(m.role)) invalid(`${path}.role`, `${path}.role is required: "user" or "assistant".`);
    oneOf(m.role, `${path}.role`, ['user', 'assistant']);
    const content = m.content;
    if (!given(content)) invalid(`${path}.content`, `${path}.content is required: a string or an array of blocks.`);
    if (typeof content === 'string') return;
    if (!Array.isArray(content))
      invalid(`${path}.content`, `${path}.content must be a string or an array of content blocks.`);
    content.forEach((b, j) => checkBlock(b, `${path}.content[${j}]`, m.role as string, media, false));
  });
}

function checkSystem(system: unknown): void {
  if (!given(system) || typeof system === 'string') return;
  if (!Array.isArray(system)) invalid('system', 'system must be a string or an array of text blocks.');
  system.forEach((b, j) => {
    const path = `system[${j}]`;
    if (!isObject(b) || b.type !== 'text') invalid(path, `${path} must be a text block {"type":"text","text":"…"}.`);
    requiredString(b.text, `${path}.text`, "the block's text");
  });
}

function checkTools(tools: unknown): void {
  if (!Array.isArray(tools)) invalid('tools', 'tools must be an array of {"name","description","input_schema"}.');
  tools.forEach((t, j) => {
    const path = `tools[${j}]`;
    if (!isObject(t)) invalid(path, `${path} must be an object like {"name","description","input_schema"}.`);
    const name = requiredString(t.name, `${path}.name`, "the tool's name");
    optionalString(t.type, `${path}.type`);
    // Anthropic's own tools (web search, bash, the text editor) carry a versioned type and no schema.
    if (given(t.type) && t.type !== 'custom') return;
    if (!TOOL_NAME.test(name)) invalid(`${path}.name`, `${path}.name must be 1-128 letters, digits, _ or -.`);
    optionalString(t.description, `${path}.description`);
    if (!isObject(t.input_schema))
      invalid(`${path}.input_schema`, `${path}.input_schema is required: the JSON Schema of the tool's input.`);
  });
}

function checkToolChoice(choice: unknown): void {
  if (!isObject(choice)) invalid('tool_choice', 'tool_choice must be an object like {"type":"auto"}.');
  oneOf(choice.type, 'tool_choice.type', ['auto', 'any', 'tool', 'none']);
  if (choice.type === 'tool') requiredString(choice.name, 'tool_choice.name', 'the tool to call');
  optionalBoolean(choice.disable_parallel_tool_use, 'tool_choice.disable_parallel_tool_use');
}

function checkThinking(thinking: unknown, maxTokens: number): void {
  if (!isObject(thinking))
    invalid('thinking', 'thinking must be an object like {"type":"enabled","budget_tokens":2048}.');
  oneOf(thinking.type, 'thinking.type', ['enabled', 'disabled', 'adaptive']);
  if (thinking.type !== 'enabled') return;
  const budget = thinking.budget_tokens;
  if (typeof budget !== 'number' || !Number.isSafeInteger(budget) || budget < 1024)
    invalid('thinking.budget_tokens', 'thinking.budget_tokens must be an integer of at least 1024.');
  if (budget >= maxTokens) invalid('thinking.budget_tokens', 'thinking.budget_tokens must be less than max_tokens.');
}

export function validateMessagesRequest(body: Json): MessagesRequest {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  const maxTokens = body.max_tokens;
  if (!given(maxTokens)) invalid('max_tokens', 'max_tokens is required: the most tokens the answer may have.');
  optionalInteger(maxTokens, 'max_tokens', 1, Number.MAX_SAFE_INTEGER);
  const media: Media = { parts: 0, chars: 0 };
  checkMessages(body.messages, media);
  checkSystem(body.system);
  optionalNumber(body.temperature, 'temperature', 0, 1);
  optionalNumber(body.top_p, 'top_p', 0, 1);
  optionalInteger(body.top_k, 'top_k', 0, Number.MAX_SAFE_INTEGER);
  const stops = body.stop_sequences;
  if (given(stops) && (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string')))
    invalid('stop_sequences', 'stop_sequences must be an array of strings.');
  optionalBoolean(body.stream, 'stream');
  if (given(body.tools)) checkTools(body.tools);
  if (given(body.tool_choice)) checkToolChoice(body.tool_choice);
  if (given(body.metadata)) {
    if (!isObject(body.metadata)) invalid('metadata', 'metadata must be an object like {"user_id":"…"}.');
    optionalString(body.metadata.user_id, 'metadata.user_id');
  }
  if (given(body.thinking)) checkThinking(body.thinking, maxTokens as number);
  return {
    model,
    stream: body.stream === true,
    media,
    completionCap: maxTokens as number,
    temperature: typeof body.temperature === 'number' ? body.temperature : null,
    topP: typeof body.top_p === 'number' ? body.top_p : null,
  };
}
