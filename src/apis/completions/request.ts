import type { ChatRequest } from '../chat/request.js';
import { checkFieldNames, fieldSet, parseJsonBody } from '../../wire/json-body.js';
import { noMedia } from '../../wire/media.js';
import { type Json, given, invalid, isObject, optionalBoolean, optionalInteger } from '../../wire/request-checks.js';

/**
 * The gate of POST /v1/completions, OpenAI's legacy text completions (docs/contract.md §3b): it
 * reads the model, the stream flag and what multiplies or caps the work it charges (`prompt`'s
 * count, `n`, `best_of`, `max_tokens`), and refuses those alone, naming the field in `param`.
 * `suffix`, sampling fields and every other field are the model server's to judge. As on chat, a
 * stream asks the model server for its usage (`stream_options.include_usage`) so the key's tokens
 * are counted, and the usage chunk reaches only a client that asked for it; otherwise the
 * client's bytes go upstream untouched.
 */
export type CompletionsRequest = Pick<
  ChatRequest,
  'model' | 'stream' | 'includeUsage' | 'rewritten' | 'addUsage' | 'media' | 'completionCap' | 'temperature' | 'topP'
>;

// The fields the gate reads: a key that differs from one of these only by case is refused
// (Go's decoder would take it for the field: json-body.ts).
const READ = fieldSet(['model', 'prompt', 'max_tokens', 'n', 'best_of', 'stream', 'stream_options']);
const STREAM_OPTIONS = fieldSet(['include_usage']);

/** The body as every decoder reads it, or 400 invalid_json (json-body.ts). */
export function parseCompletionsBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkFieldNames(body, READ.fields, READ.folded, '');
  if (isObject(body.stream_options))
    checkFieldNames(body.stream_options, STREAM_OPTIONS.fields, STREAM_OPTIONS.folded, 'stream_options');
  return body;
}

/**
 * How many prompts a `prompt` holds: a string or a list of token ids is one; a list of strings
 * or of token lists is one each. Anything else is the model server's to refuse.
 */
function promptCount(prompt: unknown): number {
  if (!Array.isArray(prompt) || prompt.length === 0) return 1;
  return prompt.every((p) => typeof p === 'number') ? 1 : prompt.length;
}

/**
 * One prompt, one completion: a model server answers a list of prompts with a completion each
 * but reports the usage of one (llama-server), so a batch would be charged a fraction of its work.
 */
function refuseMultiplied(body: Json): void {
  if (!given(body.prompt)) invalid('prompt', 'prompt is required: the text to complete.');
  if (promptCount(body.prompt) > 1)
    invalid(
      'prompt',
      'prompt must hold one prompt: send each prompt in a request of its own (a batch cannot be charged for its whole work).',
    );
  for (const field of ['n', 'best_of'] as const) {
    optionalInteger(body[field], field, 1, Number.MAX_SAFE_INTEGER);
    if (given(body[field]) && body[field] !== 1)
      invalid(field, `${field} must be 1: send one request for each completion you want.`);
  }
}

export function validateCompletionsRequest(body: Json): CompletionsRequest {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  refuseMultiplied(body);
  optionalInteger(body.max_tokens, 'max_tokens', 0, Number.MAX_SAFE_INTEGER);

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
    media: noMedia(),
    completionCap: typeof body.max_tokens === 'number' ? body.max_tokens : null,
    temperature: typeof body.temperature === 'number' ? body.temperature : null,
    topP: typeof body.top_p === 'number' ? body.top_p : null,
  };
}
