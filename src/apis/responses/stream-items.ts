import type { Json } from '../../wire/request-checks.js';
import {
  type ResponseStatus,
  functionCallItem,
  messageItem,
  outputTextPart,
  reasoningItem,
  refusalPart,
} from './object.js';

// The output items a translated Responses stream writes (apis/responses/stream.ts), and the events
// that close each.

/** An output item being written; `done` is its final shape once output_item.done is sent. */
export interface MessageState {
  kind: 'message';
  id: string;
  index: number;
  done: Json | null;
  /** Parts in content_index order; at most one of each type. */
  parts: { type: 'output_text' | 'refusal'; text: string }[];
}

export interface ReasoningState {
  kind: 'reasoning';
  id: string;
  index: number;
  done: Json | null;
  text: string;
}

export interface CallState {
  kind: 'function_call';
  id: string;
  index: number;
  done: Json | null;
  callId: string;
  name: string;
  args: string;
}

export type ItemState = MessageState | ReasoningState | CallState;

/** One Responses event: its type and its data (which repeats the type and holds `sequence_number`). */
export interface ResponsesEvent {
  type: string;
  data: Json;
}

/** The SSE frame of one event, as Ollama writes it. */
export function eventFrame(event: ResponsesEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`;
}

/**
 * The events that close an output item (its text or arguments done, its parts done, then
 * output_item.done), `item.done` set to its final shape; nothing when it is closed already.
 * `event` makes each event, with the stream's next sequence number.
 */
export function closeItem(
  item: ItemState,
  status: ResponseStatus,
  out: ResponsesEvent[],
  event: (type: string, fields: Json) => ResponsesEvent,
): void {
  if (item.done !== null) return;
  const at = { item_id: item.id, output_index: item.index };
  if (item.kind === 'reasoning') {
    out.push(event('response.reasoning_summary_text.done', { ...at, summary_index: 0, text: item.text }));
    out.push(
      event('response.reasoning_summary_part.done', {
        ...at,
        summary_index: 0,
        part: { type: 'summary_text', text: item.text },
      }),
    );
    item.done = reasoningItem(item.id, item.text);
  } else if (item.kind === 'message') {
    const parts: Json[] = [];
    for (let i = 0; i < item.parts.length; i++) {
      const p = item.parts[i] as { type: 'output_text' | 'refusal'; text: string };
      if (p.type === 'output_text') {
        out.push(event('response.output_text.done', { ...at, content_index: i, text: p.text, logprobs: [] }));
        parts.push(outputTextPart(p.text));
      } else {
        out.push(event('response.refusal.done', { ...at, content_index: i, refusal: p.text }));
        parts.push(refusalPart(p.text));
      }
      out.push(event('response.content_part.done', { ...at, content_index: i, part: parts[i] }));
    }
    item.done = messageItem(item.id, status, parts);
  } else {
    out.push(event('response.function_call_arguments.done', { ...at, arguments: item.args }));
    item.done = functionCallItem(item.id, status, item.callId, item.name, item.args);
  }
  out.push(event('response.output_item.done', { output_index: item.index, item: item.done }));
}
