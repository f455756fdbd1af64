import { prefixedId } from '../../ids.js';
import type { Clock } from '../../clock.js';
import { reasoningCount, tokenCount } from '../../wire/chat-response.js';
import { type Json, isObject } from '../../wire/request-checks.js';

/**
 * The Responses API object and its output items, as a model server's own `/v1/responses` writes
 * them (Ollama's field set, from its `openai/responses.go`), for answers translated from chat completions: a
 * client reads the same shape whether the model server served `/v1/responses` or the proxy
 * translated. Values echoed from the request come from `ResponseEcho`; item ids from an
 * injected `IdSource`, so tests are deterministic.
 */

/** The kinds of id a translated answer draws: message, reasoning and function-call items, and call ids. */
export type IdKind = 'msg' | 'rs' | 'fc' | 'call';

/** Draws one id of the given kind. Called in output order: reasoning, message, then per call `fc` (and `call`). */
export type IdSource = (kind: IdKind) => string;

/** `msg_…`, `rs_…`, `fc_…`, `call_…` with 24 random characters. */
export const randomIds: IdSource = (kind) => prefixedId(kind);

/** What every Responses object repeats of its request, filled with OpenAI's defaults where it was not given. */
export interface ResponseEcho {
  instructions: string | null;
  /** The function tools sent upstream, in the request's own (Responses) shape. */
  tools: Json[];
  toolChoice: unknown;
  parallelToolCalls: boolean;
  text: Json;
  temperature: number;
  topP: number;
  maxOutputTokens: number | null;
  reasoning: Json | null;
  metadata: Json;
  truncation: string;
}

/** What a translation of one answer needs besides the answer: who it is, what it echoes, time and ids. */
export interface ResponseContext {
  /** The response's id (`resp_…`), chosen by the caller. */
  responseId: string;
  /** The model the response names: the deployment's. */
  model: string;
  echo: ResponseEcho;
  /** Unix seconds when the request arrived: `created_at`. */
  createdAt: number;
  /** Read once, when the answer is complete: `completed_at`. */
  clock: Clock;
  ids: IdSource;
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete';

/** A chat finish reason as the Responses object states it: a cut at the token cap or by a filter is `incomplete`. */
export function statusOf(finishReason: unknown): { status: ResponseStatus; incomplete: Json | null } {
  if (finishReason === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } };
  return { status: 'completed', incomplete: null };
}

/**
 * A chat usage (`prompt_tokens`, `completion_tokens`, their details) in the Responses shape, or
 * null when the model server reported none. Counts pass through tokenCount, so a hostile value
 * becomes 0 instead of reaching a client or the key's counters as something else.
 */
export function responsesUsage(usage: unknown): Json | null {
  if (!isObject(usage)) return null;
  const input = tokenCount(usage.prompt_tokens);
  const output = tokenCount(usage.completion_tokens);
  if (input === null && output === null) return null;
  const details = usage.prompt_tokens_details;
  const cached = isObject(details) ? (tokenCount(details.cached_tokens) ?? 0) : 0;
  return {
    input_tokens: input ?? 0,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output ?? 0,
    output_tokens_details: { reasoning_tokens: reasoningCount(usage) ?? 0 },
    total_tokens: (input ?? 0) + (output ?? 0),
  };
}

export function outputTextPart(text: string): Json {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

export function refusalPart(refusal: string): Json {
  return { type: 'refusal', refusal };
}

export function messageItem(id: string, status: ResponseStatus, content: Json[]): Json {
  return { id, type: 'message', status, role: 'assistant', content };
}

/** Reasoning in clear, as Ollama writes it: the summary and `encrypted_content` both hold the text. */
export function reasoningItem(id: string, text: string): Json {
  return { id, type: 'reasoning', summary: [{ type: 'summary_text', text }], encrypted_content: text };
}

export function functionCallItem(id: string, status: ResponseStatus, callId: string, name: string, args: string): Json {
  return { id, type: 'function_call', status, call_id: callId, name, arguments: args };
}

/** Where a response stands: what changes between its events, where the context does not. */
export interface ResponseProgress {
  status: ResponseStatus;
  output: Json[];
  /** Null while it is in progress (or when the model server reported none). */
  usage: Json | null;
  incomplete: Json | null;
  /** Null until the response is completed. */
  completedAt: number | null;
}

/** The whole Responses object. */
export function responseObject(ctx: ResponseContext, p: ResponseProgress): Json {
  const e = ctx.echo;
  const { status, output, usage, incomplete, completedAt } = p;
  return {
    id: ctx.responseId,
    object: 'response',
    created_at: ctx.createdAt,
    completed_at: completedAt,
    status,
    incomplete_details: incomplete,
    model: ctx.model,
    previous_response_id: null,
    instructions: e.instructions,
    output,
    error: null,
    tools: e.tools,
    tool_choice: e.toolChoice,
    truncation: e.truncation,
    parallel_tool_calls: e.parallelToolCalls,
    text: e.text,
    top_p: e.topP,
    presence_penalty: 0,
    frequency_penalty: 0,
    top_logprobs: 0,
    temperature: e.temperature,
    reasoning: e.reasoning,
    usage,
    max_output_tokens: e.maxOutputTokens,
    max_tool_calls: null,
    store: false,
    background: false,
    service_tier: 'default',
    metadata: e.metadata,
    safety_identifier: null,
    prompt_cache_key: null,
  };
}

/** Unix seconds of a clock reading. */
export function unixSeconds(clock: Clock): number {
  return Math.floor(clock.now() / 1000);
}
