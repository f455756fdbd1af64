import { obError } from '../../errors.js';
import { checkFieldNames, fieldSet, parseJsonBody } from '../../wire/json-body.js';
import { type Media, countMedia, noMedia } from '../../wire/media.js';
import { type Json, given, invalid, isObject, optionalBoolean, optionalInteger } from '../../wire/request-checks.js';

/**
 * The gate of POST /v1/responses (docs/contract.md §3b): it reads the model, the stream flag,
 * `max_output_tokens` (the cap it charges) and the shape of `input` (what the prompt estimate
 * counts), refuses those alone with the field's path in `param`, and refuses the stateful fields
 * no model server honours. Item types, roles, tools and every other field are the model server's
 * to judge: the client's bytes go upstream untouched (a stream's usage comes in its
 * `response.completed` event, unasked). Where the request is translated to chat completions
 * instead, the translation reads more (apis/responses/to-chat.ts).
 */
export interface ResponsesRequest {
  model: string;
  stream: boolean;
  media: Media;
  /** `max_output_tokens`, or null. */
  completionCap: number | null;
  /** temperature and top_p as given, when numbers, or null: for traces. */
  temperature: number | null;
  topP: number | null;
  /** The body as parsed: what a translation to chat completions reads, where the model server has no /v1/responses. */
  body: Json;
}

// The fields the gate reads (and the translation starts from): a key that differs from one of
// these only by case is refused (Go's decoder would take it for the field: json-body.ts).
const READ = fieldSet([
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'max_output_tokens',
  'stream',
  'previous_response_id',
  'conversation',
]);

/** The body as every decoder reads it, its read fields' names checked (json-body.ts). */
export function parseResponsesBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkFieldNames(body, READ.fields, READ.folded, '');
  return body;
}

/**
 * Fields the instance cannot honour, refused rather than ignored: a model server keeps no
 * responses or conversations (Ollama drops `previous_response_id` silently, and the client's
 * next turn is answered without its context). Over HTTP the gateway keeps none either; a
 * Responses WebSocket keeps its own last response (socket-create.ts), and says so here.
 */
function refuseStateful(body: Json): void {
  for (const field of ['previous_response_id', 'conversation'] as const) {
    if (given(body[field]))
      throw obError('unsupported_parameter', {
        param: field,
        message: `${field} is not supported: this deployment keeps no responses or conversations. Send the whole conversation in \`input\` (with store: false, SDKs send every item)${field === 'previous_response_id' ? ', or continue over a Responses WebSocket, which keeps its last response' : ''}.`,
      });
  }
}

/** Responses' media parts and the field that holds each one's payload. */
const MEDIA_PARTS = { input_image: 'image_url', input_file: 'file_data' } as const;

export function validateResponsesRequest(body: Json): ResponsesRequest {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  refuseStateful(body);

  const media = noMedia();
  const input = body.input;
  if (given(input) && typeof input !== 'string') {
    if (!Array.isArray(input)) invalid('input', 'input must be a string or an array of items.');
    for (const item of input) if (isObject(item)) countMedia(item.content, MEDIA_PARTS, media);
  }
  optionalInteger(body.max_output_tokens, 'max_output_tokens', 1, Number.MAX_SAFE_INTEGER);
  optionalBoolean(body.stream, 'stream');

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
