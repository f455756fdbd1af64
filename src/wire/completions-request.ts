import type { ChatRequest } from './chat-request.js';
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
 * Validation of POST /v1/completions, OpenAI's legacy text completions (docs/contract.md §6):
 * the fields OpenAI documents, checked for type and range with the field's path in `param`;
 * fields not listed are forwarded. As on chat, a stream asks the model server for its usage
 * (`stream_options.include_usage`) so the key's tokens are counted, and the usage chunk reaches
 * only a client that asked for it; otherwise the client's bytes go upstream untouched.
 */
export type CompletionsRequest = Pick<
  ChatRequest,
  'model' | 'stream' | 'includeUsage' | 'rewritten' | 'addUsage' | 'media' | 'completionCap' | 'temperature' | 'topP'
>;

// The fields OpenAI's legacy completions, Ollama and vLLM decode. A key that differs from one of
// these only by case is refused (Go's decoder would take it for the field: json-body.ts).
const TOP = fieldSet([
  'model',
  'prompt',
  'suffix',
  'max_tokens',
  'temperature',
  'top_p',
  'n',
  'stream',
  'stream_options',
  'logprobs',
  'echo',
  'stop',
  'presence_penalty',
  'frequency_penalty',
  'best_of',
  'logit_bias',
  'user',
  'seed',
  'top_k',
  'min_p',
  'repetition_penalty',
]);
const STREAM_OPTIONS = fieldSet(['include_usage', 'include_obfuscation']);

/** The body as every decoder reads it, or 400 invalid_json (json-body.ts). */
export function parseCompletionsBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkFieldNames(body, TOP.fields, TOP.folded, '');
  if (isObject(body.stream_options))
    checkFieldNames(body.stream_options, STREAM_OPTIONS.fields, STREAM_OPTIONS.folded, 'stream_options');
  return body;
}

const PROMPT_HELP = 'prompt must be a string or an array of strings (or of token ids).';

/** A string, an array of strings, of token ids, or of arrays of token ids (OpenAI's four forms). */
function checkPrompt(prompt: unknown): void {
  if (!given(prompt)) invalid('prompt', 'prompt is required: the text to complete.');
  if (typeof prompt === 'string') return;
  if (!Array.isArray(prompt) || prompt.length === 0) invalid('prompt', PROMPT_HELP);
  const token = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  const ok =
    prompt.every((p) => typeof p === 'string') ||
    prompt.every(token) ||
    prompt.every((p) => Array.isArray(p) && p.length > 0 && p.every(token));
  if (!ok) invalid('prompt', PROMPT_HELP);
}

function checkStop(stop: unknown): void {
  if (!given(stop) || typeof stop === 'string') return;
  if (!Array.isArray(stop) || stop.length > 4 || !stop.every((s) => typeof s === 'string'))
    invalid('stop', 'stop must be a string or an array of at most 4 strings.');
}

export function validateCompletionsRequest(body: Json): CompletionsRequest {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  checkPrompt(body.prompt);
  optionalString(body.suffix, 'suffix');
  optionalInteger(body.max_tokens, 'max_tokens', 0, Number.MAX_SAFE_INTEGER);
  optionalNumber(body.temperature, 'temperature', 0, 2);
  optionalNumber(body.top_p, 'top_p', 0, 1);
  optionalNumber(body.frequency_penalty, 'frequency_penalty', -2, 2);
  optionalNumber(body.presence_penalty, 'presence_penalty', -2, 2);
  optionalInteger(body.logprobs, 'logprobs', 0, 5);
  optionalBoolean(body.echo, 'echo');
  optionalString(body.user, 'user');
  checkStop(body.stop);
  if (given(body.seed) && (typeof body.seed !== 'number' || !Number.isInteger(body.seed)))
    invalid('seed', 'seed must be an integer.');
  if (given(body.logit_bias)) {
    const bias = body.logit_bias;
    if (!isObject(bias))
      invalid('logit_bias', 'logit_bias must be an object of token ids to numbers from -100 to 100.');
    for (const token in bias) optionalNumber(bias[token], `logit_bias.${token}`, -100, 100);
  }
  optionalInteger(body.best_of, 'best_of', 0, 20);
  if (given(body.best_of) && body.best_of !== 1)
    invalid('best_of', 'best_of must be 1: the model server returns exactly one choice.');
  optionalInteger(body.n, 'n', 1, 128);
  if (given(body.n) && body.n !== 1) invalid('n', 'n must be 1: the model server returns exactly one choice.');

  const stream = body.stream;
  optionalBoolean(stream, 'stream');
  const so = body.stream_options;
  let includeUsage = false;
  if (given(so)) {
    if (!isObject(so)) invalid('stream_options', 'stream_options must be an object.');
    optionalBoolean(so.include_usage, 'stream_options.include_usage');
    includeUsage = so.include_usage === true;
  }
  const streaming = stream === true;
  // Usage is counted per key for every stream: asked of the model server, and dropped before it
  // reaches a client that did not ask. Options the client sent are merged by a rewrite.
  const askUsage = streaming && !includeUsage;
  const merge = askUsage && so !== undefined;
  return {
    model,
    stream: streaming,
    includeUsage: streaming && includeUsage,
    rewritten: merge ? { ...body, stream_options: { ...(isObject(so) ? so : {}), include_usage: true } } : null,
    addUsage: askUsage && !merge,
    media: { parts: 0, chars: 0 },
    completionCap: typeof body.max_tokens === 'number' ? body.max_tokens : null,
    temperature: typeof body.temperature === 'number' ? body.temperature : null,
    topP: typeof body.top_p === 'number' ? body.top_p : null,
  };
}
