import { obError } from '../../errors.js';
import { clipped } from '../../printable.js';
import { checkFieldNames, fieldSet } from '../../wire/json-body.js';
import { type Json, given, invalid, isObject } from '../../wire/request-checks.js';
import { type ResponseContext, type ResponseEcho, randomIds, responseObject } from './object.js';
import { parseResponsesBody } from './request.js';
import { responsesToChat } from './to-chat.js';

/**
 * A `response.create` event of the Responses API's WebSocket mode (docs/compatibility.md): the
 * body of POST /v1/responses with a `type`, streamed by nature. Each one becomes one streamed
 * POST to the model server, which needs no WebSocket; `previous_response_id` continues the
 * socket's last response from what the socket keeps of it (`Turn`), since no model server keeps
 * responses.
 */

/** What a socket keeps of its last response: the input sent for it and its output, as items. */
export interface Turn {
  /** Our response id, as its events named it. */
  readonly id: string;
  readonly items: readonly unknown[];
  /** Its size as JSON, at most: what the socket holds in the key's share of body memory. */
  readonly bytes: number;
}

/** A create event read and made into the body sent upstream. */
export interface CreateEvent {
  /** The Responses body: `type` left out, `stream: true`, and a continuation's input in full. */
  body: Json;
  /** The response it continues, or null. */
  previous: string | null;
  /** `generate: false`: the input is kept as the socket's last response, and nothing is generated. */
  warmup: boolean;
}

// Read here besides what the HTTP gate reads: a key differing from one of these only by case is
// refused (Go's decoder would take "Stream" for `stream`, which the socket sets).
const SOCKET_FIELDS = fieldSet(['type', 'background', 'generate']);

/**
 * The event's JSON, read as every decoder reads it (the HTTP body's rule), its type checked, and
 * its continuation resolved from `last`. Throws 400 naming the field, or previous_response_not_found.
 */
export function readCreateEvent(raw: Buffer, last: Turn | null): CreateEvent {
  const event = parseResponsesBody(raw);
  checkFieldNames(event, SOCKET_FIELDS.fields, SOCKET_FIELDS.folded, '');
  if (event.type !== 'response.create')
    invalid(
      'type',
      `The socket takes "response.create" events only${typeof event.type === 'string' ? `, not "${clipped(event.type)}"` : ''}.`,
    );
  if (given(event.background) && event.background !== false)
    invalid('background', 'background is not supported over a WebSocket: its responses stream on the socket.');
  if (given(event.generate) && typeof event.generate !== 'boolean')
    invalid('generate', 'generate must be true or false.');
  const previous = event.previous_response_id;
  if (given(previous) && typeof previous !== 'string')
    invalid('previous_response_id', 'previous_response_id must be a string.');

  // The body in the event's own key order, as the model server will read it.
  const body: Json = {};
  for (const k of Object.keys(event)) {
    if (k === 'type' || k === 'previous_response_id' || k === 'stream' || k === 'background' || k === 'generate')
      continue;
    body[k] = event[k];
  }
  body.stream = true;
  if (typeof previous === 'string') {
    if (last === null || last.id !== previous) throw notFound(previous);
    const input = body.input;
    if (!given(input) || typeof input === 'string' || Array.isArray(input))
      body.input = [...last.items, ...asItems(input)];
  }
  return { body, previous: typeof previous === 'string' ? previous : null, warmup: event.generate === false };
}

export function notFound(id: string): never {
  throw obError('previous_response_not_found', {
    param: 'previous_response_id',
    message: `Previous response with id "${clipped(id)}" not found. A socket keeps only its own last response, while it is open; send the whole conversation in \`input\` without previous_response_id.`,
  });
}

/** A create event's input as items: a string is one user message. */
export function asItems(input: unknown): unknown[] {
  if (input === undefined || input === null) return [];
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return input as unknown[];
}

/**
 * The socket's turn after a response that ended whole (`response.completed` or
 * `.incomplete`): its input and its output items, or null when the event holds no output list.
 * Ollama writes an answer without items as `"output": null` (a Go nil slice): none.
 */
export function turnOf(id: string, input: unknown, response: Json, bytes: number): Turn | null {
  const output = response.output ?? [];
  if (!Array.isArray(output)) return null;
  return { id, items: [...asItems(input), ...output], bytes };
}

/** A lifecycle event's response object (`response.created`, `.completed`, …), or null. */
export function responseOf(event: unknown): Json | null {
  return isObject(event) && isObject(event.response) ? event.response : null;
}

const NO_USAGE = {
  input_tokens: 0,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: 0,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: 0,
};

/**
 * The answer to a warm-up (`generate: false`): the response created and completed with no
 * output, as SSE frames for the socket's relay path, so its input becomes the socket's last
 * response without a model server hearing of it. Codex sends one before each turn and continues
 * from it; sent upstream, it cost a whole generation each time.
 */
export function warmupAnswer(id: string, model: string, body: Json, nowMs: number): string {
  const seconds = Math.floor(nowMs / 1000);
  const ctx: ResponseContext = {
    responseId: id,
    model,
    echo: echoOf(body),
    createdAt: seconds,
    clock: { now: () => nowMs },
    ids: randomIds,
  };
  const created = responseObject(ctx, {
    status: 'in_progress',
    output: [],
    usage: null,
    incomplete: null,
    completedAt: null,
  });
  const completed = responseObject(ctx, {
    status: 'completed',
    output: [],
    usage: NO_USAGE,
    incomplete: null,
    completedAt: seconds,
  });
  const frame = (type: string, n: number, response: Json): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, response })}\n\n`;
  return frame('response.created', 0, created) + frame('response.completed', 1, completed);
}

/** What the response repeats of its request, read as a translation would; OpenAI's defaults where it cannot be. */
function echoOf(body: Json): ResponseEcho {
  try {
    return responsesToChat(body, { otherTools: 'drop' }).echo;
  } catch {
    return {
      instructions: typeof body.instructions === 'string' ? body.instructions : null,
      tools: [],
      toolChoice: 'auto',
      parallelToolCalls: true,
      text: { format: { type: 'text' } },
      temperature: 1,
      topP: 1,
      maxOutputTokens: null,
      reasoning: null,
      metadata: {},
      truncation: 'disabled',
    };
  }
}
