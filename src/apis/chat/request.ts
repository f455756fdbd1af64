import { readMessages } from './messages.js';
import { type Media, noMedia } from '../../wire/media.js';
import { checkFieldNames, fieldSet, parseJsonBody, stringifyExact } from '../../wire/json-body.js';
import { type Json, invalid, isObject, optionalNumber } from '../../wire/request-checks.js';

/**
 * The gate of POST /v1/chat/completions (docs/contract.md §3b): it reads what the key's promise
 * needs (the model, the stream flag, the caps it charges, `n`, and SPEC's ranges of temperature
 * and top_p) and refuses those alone, naming the field in `param`. Every other field reaches the
 * model server as the client wrote it: the server, not the gate, judges what it can serve. It
 * also tells whether the body must be rewritten before it goes upstream (otherwise the client's
 * bytes are forwarded untouched).
 */
export interface ChatRequest {
  model: string;
  stream: boolean;
  /** The client asked for the usage chunk (stream_options.include_usage). */
  includeUsage: boolean;
  /** The body to send upstream, when it differs from the client's bytes; null to forward as is. */
  rewritten: Record<string, unknown> | null;
  /**
   * The client's bytes go upstream with `"stream_options":{"include_usage":true}` spliced in:
   * a stream is otherwise untouched and the client sent no stream_options (see upstreamBody).
   */
  addUsage: boolean;
  /** Image, audio and file parts, and their encoded characters: what the prompt estimate leaves out. */
  media: Media;
  /** The completion's cap (effectiveCap), the one the model server is sent as max_tokens, or null. */
  completionCap: number | null;
  /** temperature and top_p as given (checked numbers), or null: for traces. */
  temperature: number | null;
  topP: number | null;
}

// The fields the gate reads. A key that differs from one of these only by case is refused
// (json-body.ts): Go's decoder would take it for the field, and the model server would read a
// value the gate never checked. Every other key is the model server's to read.
const READ = fieldSet([
  'model',
  'messages',
  'stream',
  'stream_options',
  'max_tokens',
  'max_completion_tokens',
  'n',
  'temperature',
  'top_p',
]);
const STREAM_OPTIONS = fieldSet(['include_usage']);

function checkNames(body: Json): void {
  checkFieldNames(body, READ.fields, READ.folded, '');
  if (isObject(body.stream_options))
    checkFieldNames(body.stream_options, STREAM_OPTIONS.fields, STREAM_OPTIONS.folded, 'stream_options');
}

function optionalTokenCap(body: Json, field: string): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)
    invalid(field, `${field} must be a positive integer.`);
}

/**
 * The completion's cap as OpenAI and vLLM read a request (max_completion_tokens, which OpenAI
 * documents as replacing the deprecated max_tokens, wins when both are given), or null. Every cap
 * or estimate the proxy derives from a request takes it from here, and upstreamBody sends this
 * cap, and no other, to the model server.
 */
export function effectiveCap(body: Json): number | null {
  const cap = body.max_completion_tokens ?? body.max_tokens;
  return typeof cap === 'number' ? cap : null;
}

/**
 * The body as every decoder will read it, or 400 invalid_json: JSON, UTF-8, no repeated key, no
 * key that a case-insensitive decoder would take for a field, bounded depth. What
 * validateChatRequest then checks is what the model server reads.
 */
export function parseChatBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkNames(body);
  return body;
}

export function validateChatRequest(body: Json): ChatRequest {
  let rewrite = false;
  const model = body.model;
  if (model === undefined || model === null) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');

  const media = noMedia();
  const outMessages = readMessages(body.messages, media);
  if (outMessages !== null) rewrite = true;

  optionalNumber(body.temperature, 'temperature', 0, 2);
  optionalNumber(body.top_p, 'top_p', 0, 1);
  optionalTokenCap(body, 'max_tokens');
  optionalTokenCap(body, 'max_completion_tokens');
  const completionCap = effectiveCap(body);
  // The two fields mean different things to different model servers: Ollama ignores
  // max_completion_tokens (ollama/ollama#7125) and reads max_tokens, vLLM and OpenAI give
  // max_completion_tokens precedence. Whenever it is given, the cap goes upstream as max_tokens
  // alone, so every model server reads the one cap the proxy checks and charges.
  const mapCap = body.max_completion_tokens != null;
  if (mapCap) rewrite = true;

  const n = body.n;
  if (n !== undefined && n !== null && n !== 1)
    invalid('n', 'n must be 1: the model server returns exactly one choice.');

  const stream = body.stream;
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean')
    invalid('stream', 'stream must be true or false.');
  const so = body.stream_options;
  let includeUsage = false;
  if (so !== undefined && so !== null) {
    if (!isObject(so)) invalid('stream_options', 'stream_options must be an object.');
    const iu = so.include_usage;
    if (iu !== undefined && iu !== null && typeof iu !== 'boolean')
      invalid('stream_options.include_usage', 'stream_options.include_usage must be true or false.');
    includeUsage = iu === true;
  }
  const streaming = stream === true;
  // Usage is counted per key for every stream: ask the upstream for it and drop the chunk
  // before it reaches a client that did not ask. Options the client sent are merged by a rewrite.
  const askUsage = streaming && !includeUsage;
  if (askUsage && so !== undefined) rewrite = true;

  let rewritten: Json | null = null;
  if (rewrite) {
    rewritten = { ...body };
    if (outMessages !== null) rewritten.messages = outMessages;
    if (mapCap) {
      rewritten.max_tokens = completionCap;
      delete rewritten.max_completion_tokens;
    }
    if (askUsage) rewritten.stream_options = { ...(isObject(so) ? so : {}), include_usage: true };
  }
  return {
    model,
    stream: streaming,
    includeUsage: streaming && includeUsage,
    rewritten,
    addUsage: askUsage && !rewrite,
    media,
    completionCap,
    temperature: (body.temperature as number | null | undefined) ?? null,
    topP: (body.top_p as number | null | undefined) ?? null,
  };
}

const USAGE_OPTION = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The bytes to send upstream for a validated request whose raw body is `raw`. Most streams
 * need only the usage option: it is spliced in after the opening brace (the body has no
 * stream_options key, so no duplicate is made), instead of serialising the parsed body again,
 * which costs as much as parsing it did.
 */
export function upstreamBody(raw: Buffer, chat: Pick<ChatRequest, 'rewritten' | 'addUsage'>): Buffer | string {
  if (chat.rewritten !== null) return stringifyExact(raw, chat.rewritten);
  if (!chat.addUsage) return raw;
  // The body parsed as a JSON object, so its first byte other than JSON whitespace is the brace.
  const at = raw.indexOf(0x7b);
  return Buffer.concat([raw.subarray(0, at + 1), USAGE_OPTION, raw.subarray(at + 1)]);
}
