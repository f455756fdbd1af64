import { obError } from '../../errors.js';
import { MAX_TOOL_CALLS, argumentsText, reasoningField, textField } from './from-chat.js';
import { type Json, isObject } from '../../wire/request-checks.js';
import {
  type ResponseContext,
  type ResponseStatus,
  functionCallItem,
  outputTextPart,
  refusalPart,
  responseObject,
  responsesUsage,
  statusOf,
  unixSeconds,
} from './object.js';
import {
  type CallState,
  type ItemState,
  type MessageState,
  type ReasoningState,
  type ResponsesEvent,
  closeItem,
  eventFrame,
} from './stream-items.js';

/**
 * A chat completions stream as the Responses event stream (as Ollama's `openai/responses.go` does), one chat chunk at a
 * time. Events are `event: <type>\ndata: <json>\n\n` frames with `sequence_number` from 0 and
 * no `[DONE]`, as Ollama writes them:
 *
 *   response.created, response.in_progress, then per output item
 *   - reasoning: output_item.added, reasoning_summary_part.added, reasoning_summary_text.delta…,
 *     reasoning_summary_text.done, reasoning_summary_part.done, output_item.done
 *   - message: output_item.added, content_part.added, output_text.delta… (refusal.delta… for a
 *     refusal part), output_text.done, content_part.done, output_item.done
 *   - function_call: output_item.added, function_call_arguments.delta…,
 *     function_call_arguments.done, output_item.done
 *   then response.completed (response.incomplete at the token cap) with the whole response.
 *
 * Reasoning and message items follow one another: a delta of another kind closes the open one.
 * Function calls stay open until the end, since chat streams may interleave the argument
 * deltas of several calls (by `index`). The summary part events, which Ollama leaves out, are
 * sent: without them the openai SDK's stream helper throws on reasoning.
 *
 * Every field of a chunk is read as `unknown`: a hostile model server's wrong types are
 * skipped, more than MAX_TOOL_CALLS calls or an error chunk throw `upstream_error`, and what is
 * held (the answer's text) grows only as far as the caller's bound on the upstream answer.
 */

export class ResponsesStreamTranslator {
  private seq = 0;
  private started = false;
  private ended = false;
  /** Output items in output_index order, open or done. */
  private readonly items: ItemState[] = [];
  /** The reasoning or message item being written, if any. */
  private current: (MessageState | ReasoningState) | null = null;
  /** Function calls by the chat delta's index. */
  private readonly calls = new Map<number, CallState>();
  /** The chat finish reason, once a chunk gave one. */
  finishReason: string | null = null;
  /** The last usage the model server reported (chat shape, unchecked: tokenCount it before counting). */
  usage: unknown = null;
  /** Chunks that carried reasoning, text, a refusal or tool-call arguments: what an estimate of the completion counts. */
  contentChunks = 0;

  constructor(private readonly ctx: ResponseContext) {}

  /** The `sequence_number` the next event gets: an error event ending the stream takes it. */
  get nextSequence(): number {
    return this.seq;
  }

  /** A chunk gave a finish reason: the answer is whole (the usage chunk and `[DONE]` may still follow). */
  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** response.completed, response.incomplete or an error event was sent: nothing more will be. */
  get closed(): boolean {
    return this.ended;
  }

  /** response.created and response.in_progress, once: sent by the first push, or earlier by the caller. */
  startEvents(): ResponsesEvent[] {
    if (this.started || this.ended) return [];
    this.started = true;
    const response = responseObject(this.ctx, {
      status: 'in_progress',
      output: [],
      usage: null,
      incomplete: null,
      completedAt: null,
    });
    return [this.event('response.created', { response }), this.event('response.in_progress', { response })];
  }

  /** The events for one parsed chat chunk (a `data:` line's JSON). */
  pushEvents(chunk: unknown): ResponsesEvent[] {
    if (this.ended) return [];
    // Refused before any event is made, so that no sequence number is spent on an event never sent.
    if (isObject(chunk)) this.refuse(chunk);
    const out = this.startEvents();
    if (!isObject(chunk)) return out;
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    const choices = chunk.choices;
    const choice: unknown = Array.isArray(choices) ? choices[0] : undefined;
    if (!isObject(choice)) return out;
    const delta = choice.delta;
    if (isObject(delta)) {
      let carried = false;
      const reasoning = reasoningField(delta);
      if (reasoning !== '') {
        this.reasoningDelta(reasoning, out);
        carried = true;
      }
      const content = textField(delta.content);
      if (content !== '') {
        this.partDelta('output_text', content, out);
        carried = true;
      }
      const refusal = textField(delta.refusal);
      if (refusal !== '') {
        this.partDelta('refusal', refusal, out);
        carried = true;
      }
      if (Array.isArray(delta.tool_calls)) {
        for (let i = 0; i < delta.tool_calls.length; i++) {
          const call: unknown = delta.tool_calls[i];
          if (isObject(call) && this.callDelta(call, i, out)) carried = true;
        }
      }
      if (carried) this.contentChunks++;
    }
    if (typeof choice.finish_reason === 'string' && choice.finish_reason !== '')
      this.finishReason = choice.finish_reason;
    return out;
  }

  /**
   * The closing events, at the chat stream's `[DONE]`: every open item done, an empty message
   * when the answer has neither text nor calls (a Responses answer always has one), then
   * response.completed, or response.incomplete when the model server cut at the token cap.
   */
  endEvents(): ResponsesEvent[] {
    if (this.ended) return [];
    const out = this.startEvents();
    const { status, incomplete } = statusOf(this.finishReason);
    const itemStatus: ResponseStatus = status === 'incomplete' ? 'incomplete' : 'completed';
    if (this.calls.size === 0 && !this.items.some((item) => item.kind === 'message')) {
      this.closeCurrent(out, 'completed');
      this.openMessage('output_text', out);
    }
    const open = this.items.filter((item) => item.done === null);
    for (const item of open) this.close(item, out, itemStatus);
    this.current = null;
    const output = this.items.map((item) => item.done as Json);
    const response = responseObject(this.ctx, {
      status,
      output,
      usage: responsesUsage(this.usage),
      incomplete,
      completedAt: status === 'completed' ? unixSeconds(this.ctx.clock) : null,
    });
    out.push(this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }));
    this.ended = true;
    return out;
  }

  /**
   * The one error event that ends a stream cut short (revocation, pack end, upstream failure),
   * in the Responses stream's own shape (docs/contract.md §6). Nothing is sent after it.
   */
  errorEvent(code: string, message: string): ResponsesEvent {
    const data = { type: 'error', code, message, param: null, sequence_number: this.seq++ };
    this.ended = true;
    return { type: 'error', data };
  }

  /** `startEvents` as frames to write ('' once sent). */
  start(): string {
    return frames(this.startEvents());
  }

  /** `pushEvents` as frames to write ('' when the chunk adds nothing). */
  push(chunk: unknown): string {
    return frames(this.pushEvents(chunk));
  }

  /** `endEvents` as frames to write. */
  end(): string {
    return frames(this.endEvents());
  }

  /** `errorEvent` as a frame to write. */
  error(code: string, message: string): string {
    return eventFrame(this.errorEvent(code, message));
  }

  /** Throws `upstream_error` for an error chunk, or one that would take the calls past MAX_TOOL_CALLS. */
  private refuse(chunk: Json): void {
    if (chunk.error !== undefined && chunk.error !== null)
      throw obError('upstream_error', { message: 'The model server ended the stream with an error.' });
    const choice: unknown = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    const delta = isObject(choice) ? choice.delta : undefined;
    if (!isObject(delta) || !Array.isArray(delta.tool_calls)) return;
    const fresh = new Set<number>();
    for (let i = 0; i < delta.tool_calls.length; i++) {
      const call: unknown = delta.tool_calls[i];
      if (!isObject(call)) continue;
      const key = callKey(call, i);
      if (!this.calls.has(key)) fresh.add(key);
    }
    if (this.calls.size + fresh.size > MAX_TOOL_CALLS)
      throw obError('upstream_error', {
        message: `The model server sent more than ${MAX_TOOL_CALLS} tool calls in one answer.`,
      });
  }

  private event(type: string, fields: Json): ResponsesEvent {
    return { type, data: { type, ...fields, sequence_number: this.seq++ } };
  }

  private add(item: ItemState, added: Json, out: ResponsesEvent[]): void {
    this.items.push(item);
    out.push(this.event('response.output_item.added', { output_index: item.index, item: added }));
  }

  private reasoningDelta(text: string, out: ResponsesEvent[]): void {
    let r = this.current;
    if (r === null || r.kind !== 'reasoning') {
      this.closeCurrent(out, 'completed');
      r = { kind: 'reasoning', id: this.ctx.ids('rs'), index: this.items.length, text: '', done: null };
      this.add(r, { id: r.id, type: 'reasoning', summary: [] }, out);
      this.current = r;
      out.push(
        this.event('response.reasoning_summary_part.added', {
          item_id: r.id,
          output_index: r.index,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        }),
      );
    }
    r.text += text;
    out.push(
      this.event('response.reasoning_summary_text.delta', {
        item_id: r.id,
        output_index: r.index,
        summary_index: 0,
        delta: text,
      }),
    );
  }

  private openMessage(type: 'output_text' | 'refusal', out: ResponsesEvent[]): MessageState {
    const m: MessageState = {
      kind: 'message',
      id: this.ctx.ids('msg'),
      index: this.items.length,
      parts: [],
      done: null,
    };
    this.add(m, { id: m.id, type: 'message', status: 'in_progress', role: 'assistant', content: [] }, out);
    this.current = m;
    this.openPart(m, type, out);
    return m;
  }

  private openPart(m: MessageState, type: 'output_text' | 'refusal', out: ResponsesEvent[]): void {
    m.parts.push({ type, text: '' });
    out.push(
      this.event('response.content_part.added', {
        item_id: m.id,
        output_index: m.index,
        content_index: m.parts.length - 1,
        part: type === 'output_text' ? outputTextPart('') : refusalPart(''),
      }),
    );
  }

  private partDelta(type: 'output_text' | 'refusal', text: string, out: ResponsesEvent[]): void {
    let m = this.current;
    if (m === null || m.kind !== 'message') {
      this.closeCurrent(out, 'completed');
      m = this.openMessage(type, out);
    }
    let at = m.parts.findIndex((p) => p.type === type);
    if (at === -1) {
      this.openPart(m, type, out);
      at = m.parts.length - 1;
    }
    (m.parts[at] as { text: string }).text += text;
    const fields: Json = { item_id: m.id, output_index: m.index, content_index: at, delta: text };
    if (type === 'output_text') fields.logprobs = [];
    out.push(this.event(type === 'output_text' ? 'response.output_text.delta' : 'response.refusal.delta', fields));
  }

  /** One entry of a delta's `tool_calls`; true when it carried arguments. */
  private callDelta(call: Json, position: number, out: ResponsesEvent[]): boolean {
    const key = callKey(call, position);
    const fn = isObject(call.function) ? call.function : {};
    let state = this.calls.get(key);
    if (state === undefined) {
      this.closeCurrent(out, 'completed');
      const id = this.ctx.ids('fc');
      state = {
        kind: 'function_call',
        id,
        index: this.items.length,
        callId: textField(call.id) || this.ctx.ids('call'),
        name: textField(fn.name),
        args: '',
        done: null,
      };
      this.add(state, functionCallItem(id, 'in_progress', state.callId, state.name, ''), out);
      this.calls.set(key, state);
    } else if (state.name === '' && textField(fn.name) !== '') {
      state.name = textField(fn.name);
    }
    const args = argumentsText(fn.arguments);
    if (args === '') return false;
    state.args += args;
    out.push(
      this.event('response.function_call_arguments.delta', {
        item_id: state.id,
        output_index: state.index,
        delta: args,
      }),
    );
    return true;
  }

  private closeCurrent(out: ResponsesEvent[], status: ResponseStatus): void {
    if (this.current === null) return;
    this.close(this.current, out, status);
    this.current = null;
  }

  private close(item: ItemState, out: ResponsesEvent[], status: ResponseStatus): void {
    closeItem(item, status, out, (type, fields) => this.event(type, fields));
  }
}

/** Which call a tool-call delta continues: its `index`, else its place in the delta's list. */
function callKey(call: Json, position: number): number {
  return typeof call.index === 'number' && Number.isSafeInteger(call.index) && call.index >= 0 ? call.index : position;
}

function frames(events: ResponsesEvent[]): string {
  let s = '';
  for (const e of events) s += eventFrame(e);
  return s;
}
