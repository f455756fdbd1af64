import { type Media, countMedia } from '../../wire/media.js';
import { type Json, invalid, isObject } from '../../wire/request-checks.js';

/**
 * The turns of a chat, read for two things only: the media parts the prompt estimate counts
 * apart, and `developer` turns, which Ollama's templates do not all know and which go up as
 * `system`. Roles, content parts, tool calls and every other field are the model server's to
 * judge: a turn it accepts reaches it as the client wrote it.
 */

/** Chat's media parts and the field that holds each one's payload. */
const MEDIA_PARTS = { image_url: 'image_url', input_audio: 'input_audio', file: 'file' } as const;

/**
 * `messages` must be a list of turn objects, each with a string `role`: the shape every model
 * server decodes (a turn of another shape is refused there too). Returns the turns to send when
 * one had to change (developer), or null when the client's own are sent.
 */
export function readMessages(messages: unknown, media: Media): unknown[] | null {
  if (messages === undefined || messages === null)
    invalid('messages', 'messages is required: an array of {role, content} turns.');
  if (!Array.isArray(messages)) invalid('messages', 'messages must be an array of {role, content} turns.');
  let out: unknown[] | null = null;
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isObject(m)) invalid(`messages[${i}]`, `messages[${i}] must be an object with role and content.`);
    if (typeof m.role !== 'string') invalid(`messages[${i}].role`, `messages[${i}].role must be a string.`);
    countMedia(m.content, MEDIA_PARTS, media);
    if (m.role === 'developer') {
      out ??= messages.slice();
      out[i] = { ...(m as Json), role: 'system' };
    }
  }
  return out;
}
