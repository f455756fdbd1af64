import { type Json, given, invalid, isObject, oneOf, optionalString, requiredString } from './request-checks.js';

/**
 * The turns of a chat, as OpenAI's chat API and the SDKs' agent loops write them: system,
 * developer, user, assistant (with tool calls, refusals and reasoning fed back) and tool results;
 * content as a string or as parts (text, images, audio). Everything is forwarded as the client
 * sent it, except `developer`, which Ollama's templates do not all know: it goes up as `system`.
 */

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;

/** Part types each role may send (OpenAI's API reference). */
const PARTS: Record<string, readonly string[]> = {
  system: ['text'],
  developer: ['text'],
  user: ['text', 'image_url', 'input_audio', 'file'],
  assistant: ['text', 'refusal'],
  tool: ['text'],
};

const IMAGE_DETAIL = ['auto', 'low', 'high'];

/** The request's image, audio and file parts: how many, and their encoded characters (prompt-estimate.ts). */
export interface Media {
  parts: number;
  chars: number;
}

function addMedia(media: Media, payload: unknown): void {
  media.parts += 1;
  if (typeof payload === 'string') media.chars += payload.length;
}

function checkPart(part: unknown, role: string, path: string, media: Media): void {
  if (!isObject(part)) invalid(path, `${path} must be an object like {"type":"text","text":"…"}.`);
  const allowed = PARTS[role] as readonly string[];
  if (typeof part.type !== 'string' || !allowed.includes(part.type)) {
    invalid(`${path}.type`, `${path}.type must be one of ${allowed.join(', ')} in a ${role} turn.`);
  }
  switch (part.type) {
    case 'text':
      requiredString(part.text, `${path}.text`, 'the text of this part');
      break;
    case 'refusal':
      requiredString(part.refusal, `${path}.refusal`, 'the refusal text');
      break;
    case 'image_url': {
      // Ollama also takes the URL as a bare string. The proxy never fetches it (no SSRF): the
      // model server reads data URLs and refuses http(s) ones itself.
      const img = part.image_url;
      if (typeof img === 'string') {
        addMedia(media, img);
        break;
      }
      if (!isObject(img))
        invalid(`${path}.image_url`, `${path}.image_url is required: {"url":"data:image/png;base64,…"}.`);
      requiredString(img.url, `${path}.image_url.url`, 'a data: URL (or a URL the model server can read)');
      if (given(img.detail)) oneOf(img.detail, `${path}.image_url.detail`, IMAGE_DETAIL);
      addMedia(media, img.url);
      break;
    }
    case 'input_audio': {
      const audio = part.input_audio;
      if (!isObject(audio))
        invalid(`${path}.input_audio`, `${path}.input_audio is required: {"data":"<base64>","format":"wav"}.`);
      requiredString(audio.data, `${path}.input_audio.data`, 'the audio as base64');
      optionalString(audio.format, `${path}.input_audio.format`);
      addMedia(media, audio.data);
      break;
    }
    case 'file':
      if (!isObject(part.file)) invalid(`${path}.file`, `${path}.file must be an object.`);
      addMedia(media, part.file.file_data);
      break;
  }
}

function checkToolCalls(calls: unknown, path: string): number {
  if (!Array.isArray(calls)) invalid(path, `${path} must be an array of tool calls.`);
  for (let j = 0; j < calls.length; j++) {
    const call: unknown = calls[j];
    const cp = `${path}[${j}]`;
    if (!isObject(call))
      invalid(cp, `${cp} must be an object like {"id","type":"function","function":{"name","arguments"}}.`);
    requiredString(call.id, `${cp}.id`, 'the id the tool result will name in tool_call_id');
    if (given(call.type)) oneOf(call.type, `${cp}.type`, ['function']);
    const fn = call.function;
    if (!isObject(fn)) invalid(`${cp}.function`, `${cp}.function is required: {"name","arguments"}.`);
    if (requiredString(fn.name, `${cp}.function.name`, "the function's name") === '')
      invalid(`${cp}.function.name`, `${cp}.function.name must not be empty.`);
    // A JSON text, as the model wrote it; the model server parses it.
    requiredString(fn.arguments, `${cp}.function.arguments`, 'the arguments as a JSON string');
  }
  return calls.length;
}

function checkContent(m: Json, role: string, path: string, hasToolCalls: boolean, media: Media): void {
  const content = m.content;
  if (!given(content)) {
    // The SDKs write an assistant turn that only called tools (or refused) back with content null.
    if (role === 'assistant' && (hasToolCalls || typeof m.refusal === 'string' || isObject(m.function_call))) return;
    invalid(
      `${path}.content`,
      `${path}.content is required: the text of the turn${role === 'assistant' ? ' (or tool_calls)' : ''}.`,
    );
  }
  if (typeof content === 'string') return;
  if (!Array.isArray(content))
    invalid(`${path}.content`, `${path}.content must be a string or an array of content parts.`);
  for (let j = 0; j < content.length; j++) checkPart(content[j], role, `${path}.content[${j}]`, media);
}

/**
 * Checks every turn; returns the turns to send upstream when one had to change (developer), or
 * null when the client's own are sent. Image, audio and file parts are added up in `media`.
 */
export function checkMessages(messages: unknown, media: Media): unknown[] | null {
  if (!given(messages)) invalid('messages', 'messages is required: an array of {role, content} turns.');
  if (!Array.isArray(messages)) invalid('messages', 'messages must be an array of {role, content} turns.');
  if (messages.length === 0) invalid('messages', 'messages must contain at least one turn.');
  let out: unknown[] | null = null;
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    const path = `messages[${i}]`;
    if (!isObject(m)) invalid(path, `${path} must be an object with role and content.`);
    const role = m.role;
    if (!given(role)) invalid(`${path}.role`, `${path}.role is required: one of ${ROLES.join(', ')}.`);
    if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role))
      invalid(`${path}.role`, `${path}.role must be one of ${ROLES.join(', ')}.`);
    let calls = 0;
    if (given(m.tool_calls)) {
      if (role !== 'assistant')
        invalid(`${path}.tool_calls`, `${path}.tool_calls is allowed only in an assistant turn.`);
      calls = checkToolCalls(m.tool_calls, `${path}.tool_calls`);
    }
    checkContent(m, role, path, calls > 0, media);
    if (role === 'tool')
      requiredString(m.tool_call_id, `${path}.tool_call_id`, 'the id of the tool call this turn answers');
    else optionalString(m.tool_call_id, `${path}.tool_call_id`);
    optionalString(m.name, `${path}.name`);
    optionalString(m.refusal, `${path}.refusal`);
    optionalString(m.reasoning, `${path}.reasoning`);
    optionalString(m.reasoning_content, `${path}.reasoning_content`);
    if (role === 'developer') {
      out ??= messages.slice();
      out[i] = { ...m, role: 'system' };
    }
  }
  return out;
}
