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
 * The request fields beyond a plain chat's (docs/contract.md §3.2), checked where OpenAI documents a type or range and
 * forwarded as sent. Fields not named here pass through untouched: clients add new ones often,
 * and the model server ignores what it does not know.
 */

// OpenAI's rule for function names; Ollama and vLLM templates put them in prompts as they are.
const FUNCTION_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

function checkTools(tools: unknown): void {
  if (!Array.isArray(tools)) invalid('tools', 'tools must be an array of {"type":"function","function":{…}}.');
  for (let j = 0; j < tools.length; j++) {
    const tool: unknown = tools[j];
    const path = `tools[${j}]`;
    if (!isObject(tool)) invalid(path, `${path} must be an object like {"type":"function","function":{"name":"…"}}.`);
    if (tool.type !== 'function')
      invalid(`${path}.type`, `${path}.type must be "function": the model servers call functions only.`);
    const fn = tool.function;
    if (!isObject(fn))
      invalid(`${path}.function`, `${path}.function is required: {"name","description","parameters"}.`);
    const name = requiredString(fn.name, `${path}.function.name`, "the function's name");
    if (!FUNCTION_NAME.test(name))
      invalid(`${path}.function.name`, `${path}.function.name must be 1-64 letters, digits, _ . : or -.`);
    optionalString(fn.description, `${path}.function.description`);
    if (given(fn.parameters) && !isObject(fn.parameters))
      invalid(`${path}.function.parameters`, `${path}.function.parameters must be a JSON Schema object.`);
    optionalBoolean(fn.strict, `${path}.function.strict`);
  }
}

function checkToolChoice(choice: unknown): void {
  if (typeof choice === 'string') {
    oneOf(choice, 'tool_choice', ['none', 'auto', 'required']);
    return;
  }
  if (!isObject(choice))
    invalid(
      'tool_choice',
      'tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":"…"}}.',
    );
  if (choice.type !== 'function') invalid('tool_choice.type', 'tool_choice.type must be "function".');
  if (!isObject(choice.function)) invalid('tool_choice.function', 'tool_choice.function is required: {"name":"…"}.');
  requiredString(choice.function.name, 'tool_choice.function.name', 'the function to call');
}

function checkResponseFormat(rf: unknown): void {
  if (!isObject(rf)) invalid('response_format', 'response_format must be an object like {"type":"json_object"}.');
  oneOf(rf.type, 'response_format.type', ['text', 'json_object', 'json_schema']);
  if (rf.type !== 'json_schema') return;
  const js = rf.json_schema;
  if (!isObject(js))
    invalid(
      'response_format.json_schema',
      'response_format.json_schema is required with type json_schema: {"name","schema"}.',
    );
  optionalString(js.name, 'response_format.json_schema.name');
  optionalString(js.description, 'response_format.json_schema.description');
  if (!isObject(js.schema))
    invalid(
      'response_format.json_schema.schema',
      'response_format.json_schema.schema is required: the JSON Schema the answer must follow.',
    );
  optionalBoolean(js.strict, 'response_format.json_schema.strict');
}

function checkStop(stop: unknown): void {
  if (typeof stop === 'string') return;
  if (!Array.isArray(stop) || stop.length > 4 || !stop.every((s) => typeof s === 'string')) {
    invalid('stop', 'stop must be a string or an array of at most 4 strings.');
  }
}

function checkLogitBias(bias: unknown): void {
  if (!isObject(bias)) invalid('logit_bias', 'logit_bias must be an object of token ids to numbers from -100 to 100.');
  for (const token in bias) optionalNumber(bias[token], `logit_bias.${token}`, -100, 100);
}

function checkMetadata(meta: unknown): void {
  if (!isObject(meta)) invalid('metadata', 'metadata must be an object of strings.');
  const keys = Object.keys(meta);
  if (keys.length > 16) invalid('metadata', 'metadata may hold at most 16 keys.');
  for (const k of keys) {
    if (k.length > 64) invalid('metadata', 'metadata keys must be at most 64 characters.');
    const v = meta[k];
    if (typeof v !== 'string' || v.length > 512)
      invalid(`metadata.${k}`, `metadata.${k} must be a string of at most 512 characters.`);
  }
}

export function checkFields(body: Json): void {
  if (given(body.tools)) checkTools(body.tools);
  if (given(body.tool_choice)) checkToolChoice(body.tool_choice);
  optionalBoolean(body.parallel_tool_calls, 'parallel_tool_calls');
  if (given(body.response_format)) checkResponseFormat(body.response_format);
  if (given(body.stop)) checkStop(body.stop);
  if (given(body.seed) && (typeof body.seed !== 'number' || !Number.isInteger(body.seed)))
    invalid('seed', 'seed must be an integer.');
  optionalNumber(body.frequency_penalty, 'frequency_penalty', -2, 2);
  optionalNumber(body.presence_penalty, 'presence_penalty', -2, 2);
  if (given(body.logit_bias)) checkLogitBias(body.logit_bias);
  optionalBoolean(body.logprobs, 'logprobs');
  optionalInteger(body.top_logprobs, 'top_logprobs', 0, 20);
  optionalString(body.user, 'user');
  if (given(body.reasoning_effort) && (typeof body.reasoning_effort !== 'string' || body.reasoning_effort === '')) {
    invalid('reasoning_effort', 'reasoning_effort must be a string such as "none", "low", "medium" or "high".');
  }
  if (given(body.metadata)) checkMetadata(body.metadata);
}
