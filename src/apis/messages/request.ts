import { checkFieldNames, fieldSet, parseJsonBody } from '../../wire/json-body.js';
import { type Media, countMedia, noMedia } from '../../wire/media.js';
import { type Json, given, invalid, isObject, optionalBoolean, optionalInteger } from '../../wire/request-checks.js';

/**
 * The gate of POST /v1/messages, Anthropic's Messages API (docs/contract.md §3b): it reads the
 * model, the stream flag and `max_tokens` (the cap it charges), and refuses those alone, naming
 * the field in `param`. Roles, block types, `system` turns inside `messages` (Claude Code writes
 * them), thinking budgets and every field Anthropic adds are the model server's to judge: the
 * client's bytes go upstream untouched. A stream's usage comes in its `message_start` and
 * `message_delta` events, unasked.
 */
export interface MessagesRequest {
  model: string;
  stream: boolean;
  media: Media;
  /** `max_tokens`, or null when the client sent none (the model server then applies its own). */
  completionCap: number | null;
  /** temperature and top_p as given, when numbers, or null: for traces. */
  temperature: number | null;
  topP: number | null;
}

// The fields the gate reads: a key that differs from one of these only by case is refused
// (Go's decoder would take it for the field: json-body.ts). Every other key is the server's.
const READ = fieldSet(['model', 'max_tokens', 'messages', 'stream']);

/** The body as every decoder reads it, or 400 invalid_json (json-body.ts). */
export function parseMessagesBody(raw: Buffer): Json {
  const { body } = parseJsonBody(raw);
  checkFieldNames(body, READ.fields, READ.folded, '');
  return body;
}

/** Messages' media blocks: images and documents carry their payload in `source`. */
const MEDIA_BLOCKS = { image: 'source', document: 'source' } as const;

/** The media blocks of every turn, for the prompt estimate; any shape the server takes is left to it. */
function countTurnMedia(messages: unknown, media: Media): void {
  if (!Array.isArray(messages)) return;
  for (const m of messages) {
    if (!isObject(m)) continue;
    countMedia(m.content, MEDIA_BLOCKS, media);
    if (!Array.isArray(m.content)) continue;
    // A tool result may hold images of its own.
    for (const block of m.content)
      if (isObject(block) && block.type === 'tool_result') countMedia(block.content, MEDIA_BLOCKS, media);
  }
}

export function validateMessagesRequest(body: Json): MessagesRequest {
  const model = body.model;
  if (!given(model)) invalid('model', 'model is required: name the model of your deployment.');
  if (typeof model !== 'string' || model === '') invalid('model', 'model must be a non-empty string.');
  optionalInteger(body.max_tokens, 'max_tokens', 1, Number.MAX_SAFE_INTEGER);
  if (!given(body.messages)) invalid('messages', 'messages is required: the conversation, as a list of turns.');
  if (!Array.isArray(body.messages)) invalid('messages', 'messages must be an array of {"role","content"} turns.');
  optionalBoolean(body.stream, 'stream');
  const media = noMedia();
  countTurnMedia(body.messages, media);
  return {
    model,
    stream: body.stream === true,
    media,
    completionCap: typeof body.max_tokens === 'number' ? body.max_tokens : null,
    temperature: typeof body.temperature === 'number' ? body.temperature : null,
    topP: typeof body.top_p === 'number' ? body.top_p : null,
  };
}
