import { MAX_CHOICES } from '../../wire/chat-response.js';
import { type Json, isObject } from '../../wire/request-checks.js';
import {
  type ResponseContext,
  functionCallItem,
  messageItem,
  outputTextPart,
  reasoningItem,
  refusalPart,
  responseObject,
  responsesUsage,
  statusOf,
  unixSeconds,
} from './object.js';

/**
 * A chat completion (non-streamed) as the Responses object a model server's own
 * `/v1/responses` would have answered (as Ollama's `openai/responses.go` does): a reasoning item when the model
 * reasoned, a message item unless the turn only called tools (always one otherwise, even
 * empty), then one function_call item per tool call. A cut at the token cap is `incomplete`,
 * as OpenAI states it, and so are the items it cut: the calls, or the message when it is last.
 */

/** More tool calls than this in one answer is not a turn the proxy relays (a hostile model server). */
export const MAX_TOOL_CALLS = 128;

/** A string field of a chat message or delta, or '' where it is absent or not a string. */
export function textField(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** The reasoning of a chat message or delta: Ollama's `reasoning`, else vLLM's and llama.cpp's `reasoning_content`. */
export function reasoningField(m: Json): string {
  return textField(m.reasoning) || textField(m.reasoning_content);
}

/** Tool-call arguments as the JSON text the Responses item carries; some servers send an object. */
export function argumentsText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (isObject(v) || Array.isArray(v)) {
    try {
      return JSON.stringify(v);
    } catch {
      return '';
    }
  }
  return '';
}

/** Message content as text: a string, or the text of content parts (some servers answer with parts). */
function contentText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v)) return '';
  let text = '';
  for (const part of v) if (isObject(part) && typeof part.text === 'string') text += part.text;
  return text;
}

/**
 * The Responses object for `completion`, or null when it is not a chat completion (no `choices`
 * list, or more than MAX_CHOICES; the caller answers it as a bad upstream answer). Usage is the
 * completion's, in the Responses shape, or null when none was reported.
 */
export function chatToResponse(completion: unknown, ctx: ResponseContext): Json | null {
  if (!isObject(completion) || !Array.isArray(completion.choices) || completion.choices.length > MAX_CHOICES)
    return null;
  const choice: unknown = completion.choices[0];
  const c = isObject(choice) ? choice : {};
  const message = isObject(c.message) ? c.message : {};
  const { status, incomplete } = statusOf(c.finish_reason);
  const itemStatus = status === 'incomplete' ? 'incomplete' : 'completed';

  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : [];
  if (calls.length > MAX_TOOL_CALLS) return null;
  const output: Json[] = [];
  const reasoning = reasoningField(message);
  if (reasoning !== '') output.push(reasoningItem(ctx.ids('rs'), reasoning));
  const content = contentText(message.content);
  const refusal = textField(message.refusal);
  if (content !== '' || refusal !== '' || calls.length === 0) {
    const parts: Json[] = [];
    if (content !== '' || refusal === '') parts.push(outputTextPart(content));
    if (refusal !== '') parts.push(refusalPart(refusal));
    output.push(messageItem(ctx.ids('msg'), calls.length === 0 ? itemStatus : 'completed', parts));
  }
  for (const call of calls) {
    const fn = isObject(call.function) ? call.function : {};
    const id = ctx.ids('fc');
    const callId = textField(call.id) || ctx.ids('call');
    output.push(functionCallItem(id, itemStatus, callId, textField(fn.name), argumentsText(fn.arguments)));
  }
  return responseObject(ctx, {
    status,
    output,
    usage: responsesUsage(completion.usage),
    incomplete,
    completedAt: status === 'completed' ? unixSeconds(ctx.clock) : null,
  });
}
